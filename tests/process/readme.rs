//! The walk-throughs of the docs, run as written: every shell block of `README.md` and of the
//! pages below is cut into commands, and the commands run in order with bash against a fresh
//! `mosaicdb` (the binary, with its default flags but a free port and a temporary data directory),
//! each page against a server of its own and in a working directory of its own (where `-o
//! db.backup` and `> users.ndjson` land).
//!
//! The rules, so that a doc stays runnable as it is written:
//!
//! - `localhost:8080` and `127.0.0.1:8080` are the test server's address.
//! - A block runs when each of its commands is a `curl` (alone, fed by `printf` or `echo`, or fed
//!   by another `curl`) or a variable assignment. A block that runs one of [`NEEDS`] — a Rust
//!   toolchain (`cargo`), PostgreSQL (`createdb`, `psql`), more servers (`mosaicdb`), a container
//!   runtime (`docker`, `kubectl`) — is skipped, and said so; a block that runs any other program
//!   fails the test, so that nothing is skipped unseen.
//! - Each `curl` must succeed (exit 0) and answer a status below 400, unless the command's
//!   trailing comment starts with a status: `# 404 document_not_found` expects exactly 404 with
//!   that problem `code`, `# 204` exactly 204.
//! - Variable assignments (`J='content-type: application/json'`) hold for the rest of the page.
//! - Placeholders are shell variables the test fills from earlier answers: `$CURSOR` is the
//!   `cursor` of the latest answer that had one, `$ETAG` the latest `ETag` header an answer showed
//!   (`curl -i`). A placeholder written any other way (`<cursor>`) is a request the server refuses.
//! - Streams never end: `curl -N` (Server-Sent Events) runs for 2 s (`--max-time 2`), and a 200
//!   cut then is a success. A long-poll's `wait_ms` is cut to 500 ms.
//! - An index answered `"state": "building"` (202) is waited for before the next command, as a
//!   reader who reads the answer would: the test reads the index until it is no longer building.
//!
//! The pages of `docs/` not run here continue a table another page made (`indexes`, `queries`,
//! `views`, `ttl`), or run the programs above (`operations`, `high-availability`, `testing`).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_mosaicdb");

/// Programs a test cannot run: a block that runs one is skipped.
const NEEDS: [&str; 6] = ["cargo", "createdb", "psql", "mosaicdb", "docker", "kubectl"];

/// Programs a runnable block may run.
const RUNS: [&str; 3] = ["curl", "printf", "echo"];

#[test]
fn the_readme_runs_as_written() {
    let ran = run_page("README.md");
    // the two set-up commands, PostgreSQL and the cluster are skipped; the walk-throughs run
    assert_eq!(ran.skipped, 3, "{ran:?}");
    assert!(ran.curls >= 20, "{ran:?}");
}

#[test]
fn the_databases_page_runs_as_written() {
    assert!(run_page("docs/databases.md").curls >= 10);
}

#[test]
fn the_documents_page_runs_as_written() {
    assert!(run_page("docs/documents.md").curls >= 15);
}

#[test]
fn the_changefeed_graph_search_sql_timeseries_and_vectors_pages_run_as_written() {
    for page in [
        "docs/changefeed.md",
        "docs/graph.md",
        "docs/search.md",
        "docs/sql.md",
        "docs/timeseries.md",
        "docs/vectors.md",
    ] {
        assert!(run_page(page).curls >= 5, "{page}");
    }
}

/// What a page ran.
#[derive(Debug, Default)]
struct Ran {
    /// curl invocations, each checked
    curls: usize,
    /// blocks skipped by the rule on [`NEEDS`]
    skipped: usize,
}

/// One shell command of a block, as written: its text (continuation lines, quoted newlines and
/// here-documents included), the comment ending it, and the line of the page it starts on.
#[derive(Debug, Clone, PartialEq)]
struct Cmd {
    text: String,
    comment: String,
    line: usize,
    /// the programs it runs, and whether it is only variable assignments
    programs: Vec<String>,
}

impl Cmd {
    fn is_assignment(&self) -> bool {
        self.programs.is_empty()
    }
}

/// The shell blocks of a Markdown page: each block's commands.
fn blocks(page: &str) -> Vec<Vec<Cmd>> {
    let mut out = Vec::new();
    let mut lines = page.lines().enumerate();
    while let Some((_, line)) = lines.next() {
        let fence = line.trim_start();
        if !["```sh", "```bash", "```shell"]
            .iter()
            .any(|f| fence.strip_prefix(f).is_some_and(|rest| rest.trim().is_empty()))
        {
            continue;
        }
        let body: Vec<(usize, &str)> =
            lines.by_ref().take_while(|(_, l)| !l.trim_start().starts_with("```")).map(|(i, l)| (i + 1, l)).collect();
        out.push(commands(&body));
    }
    out
}

/// Cuts a block's lines into commands, as bash would: a command goes on past a line ending in
/// `\`, `|` or `&&`, inside a quote, and through a here-document; a `#` that starts a word outside
/// quotes starts a comment.
fn commands(lines: &[(usize, &str)]) -> Vec<Cmd> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut code = String::new();
    let mut comment = String::new();
    let mut start = 0;
    let mut quote: Option<char> = None;
    let mut heredoc: Option<String> = None;
    for &(no, line) in lines {
        if let Some(word) = &heredoc {
            text.push_str(line);
            text.push('\n');
            if line.trim() == word {
                heredoc = None;
                out.push(finish(&mut text, &mut code, &mut comment, start));
            }
            continue;
        }
        if text.is_empty() && quote.is_none() {
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            start = no;
        }
        text.push_str(line);
        text.push('\n');
        let mut chars = line.chars().peekable();
        let mut prev = ' ';
        let mut line_code = String::new();
        while let Some(c) = chars.next() {
            match quote {
                Some(q) => {
                    line_code.push(c);
                    if c == '\\' && q == '"' {
                        if let Some(n) = chars.next() {
                            line_code.push(n);
                        }
                    } else if c == q {
                        quote = None;
                    }
                }
                None => match c {
                    '\'' | '"' => {
                        quote = Some(c);
                        line_code.push(c);
                    }
                    '\\' => {
                        line_code.push(c);
                        if let Some(n) = chars.next() {
                            line_code.push(n);
                        }
                    }
                    '#' if prev.is_whitespace() => {
                        comment = chars.by_ref().collect::<String>().trim().to_owned();
                        break;
                    }
                    _ => line_code.push(c),
                },
            }
            prev = c;
        }
        let trimmed = line_code.trim_end();
        code.push_str(trimmed.strip_suffix('\\').unwrap_or(trimmed));
        code.push(if quote.is_some() { '\n' } else { ' ' });
        if quote.is_some() || trimmed.ends_with('\\') || trimmed.ends_with('|') || trimmed.ends_with("&&") {
            continue;
        }
        if let Some(word) = heredoc_word(trimmed) {
            heredoc = Some(word);
            continue;
        }
        out.push(finish(&mut text, &mut code, &mut comment, start));
    }
    assert!(text.is_empty(), "a block ends inside a command: {text}");
    out
}

/// The word ending the here-document a line opens (`<<'LINES'`, `<<LINES`, `<<-LINES`), if any.
fn heredoc_word(code: &str) -> Option<String> {
    let at = code.find("<<")?;
    let rest = code[at + 2..].trim_start_matches('-').trim_start();
    let word: String = rest.chars().filter(|c| !matches!(c, '\'' | '"')).take_while(|c| !c.is_whitespace()).collect();
    (!word.is_empty()).then_some(word)
}

fn finish(text: &mut String, code: &mut String, comment: &mut String, line: usize) -> Cmd {
    let cmd = Cmd { text: std::mem::take(text), comment: std::mem::take(comment), line, programs: programs(code) };
    code.clear();
    cmd
}

/// The programs a command's code runs: the first word of each piece between `|`, `&&`, `||`, `;`
/// and `&` that is not a variable assignment (quotes kept whole).
fn programs(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut first = true;
    let mut quote: Option<char> = None;
    let end_word = |word: &mut String, first: &mut bool, out: &mut Vec<String>| {
        if *first && !word.is_empty() {
            let name = word.split('=').next().unwrap_or("");
            let assignment = word.contains('=')
                && !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit());
            if !assignment {
                out.push(std::mem::take(word));
                *first = false;
            }
        }
        word.clear();
    };
    for c in code.chars() {
        match quote {
            Some(q) => {
                word.push(c);
                if c == q {
                    quote = None;
                }
            }
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                word.push(c);
            }
            None if matches!(c, '|' | '&' | ';') => {
                end_word(&mut word, &mut first, &mut out);
                first = true;
            }
            None if c.is_whitespace() => end_word(&mut word, &mut first, &mut out),
            None => word.push(c),
        }
    }
    end_word(&mut word, &mut first, &mut out);
    out
}

/// A `mosaicdb` serving a temporary data directory on a free port, killed when dropped.
struct Server {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(BIN)
            .args(["--addr", &format!("127.0.0.1:{port}"), "--data-dir"])
            .arg(dir.path().join("data"))
            // the defaults a reader has, whatever this environment sets
            .env_remove("MOSAIC_API_KEYS")
            .env_remove("MOSAIC_API_KEYS_FILE")
            .env_remove("MOSAIC_BACKEND")
            .env_remove("MOSAIC_POSTGRES_URL")
            .env_remove("MOSAIC_ADVERTISE_URL")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = Server { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the placeholders hold, from the answers so far.
#[derive(Debug, Default)]
struct Answers {
    cursor: Option<String>,
    etag: Option<String>,
}

impl Answers {
    fn learn(&mut self, stdout: &str) {
        for line in stdout.lines() {
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("etag")
            {
                self.etag = Some(value.trim().to_owned());
            }
        }
        let body = stdout.rsplit("\r\n\r\n").next().unwrap_or(stdout);
        if let Ok(json) = serde_json::from_str::<serde_json::Value>(body)
            && let Some(cursor) = json["cursor"].as_str()
        {
            self.cursor = Some(cursor.to_owned());
        }
    }
}

/// Runs every block of `page` (a path under the crate) against a fresh server.
fn run_page(page: &str) -> Ran {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(page);
    let text = std::fs::read_to_string(&path).unwrap();
    let server = Server::start();
    let work = server.dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let mut ran = Ran::default();
    let mut assignments = String::new();
    let mut answers = Answers::default();
    for block in blocks(&text) {
        let needs: Vec<&str> =
            block.iter().flat_map(|c| &c.programs).map(String::as_str).filter(|p| NEEDS.contains(p)).collect();
        if !needs.is_empty() {
            println!("{page}:{}: skipped, it runs {}", block[0].line, needs.join(", "));
            ran.skipped += 1;
            continue;
        }
        for cmd in block {
            let place = format!("{page}:{}", cmd.line);
            if let Some(other) = cmd.programs.iter().find(|p| !RUNS.contains(&p.as_str())) {
                panic!("{place}: runs {other}, which the test neither runs nor skips: {}", cmd.text);
            }
            if cmd.is_assignment() {
                assignments.push_str(&cmd.text);
                continue;
            }
            ran.curls += run(&server, &work, &place, &cmd, &assignments, &mut answers);
        }
    }
    ran
}

/// Runs one command; checks every curl in it and returns how many ran.
fn run(server: &Server, work: &Path, place: &str, cmd: &Cmd, assignments: &str, answers: &mut Answers) -> usize {
    let address = format!("127.0.0.1:{}", server.port);
    let mut text = cmd.text.replace("localhost:8080", &address).replace("127.0.0.1:8080", &address);
    let stream = text.contains("curl -N");
    text = text.replace("curl -N", "curl --max-time 2 -N");
    text = cut_wait(&text);
    let script = format!(
        "set -o pipefail\ncurl() {{ command curl -sS -w '%{{stderr}}\\n@@status %{{http_code}}\\n' \"$@\"; }}\n{assignments}{text}"
    );
    let mut bash = Command::new("timeout");
    bash.args(["60", "bash", "-c", &script]).current_dir(work).stdin(Stdio::null());
    for (name, value) in [("CURSOR", &answers.cursor), ("ETAG", &answers.etag)] {
        if text.contains(&format!("${name}")) {
            let value = value.as_ref().unwrap_or_else(|| panic!("{place}: no answer so far gave ${name}: {text}"));
            bash.env(name, value);
        }
    }
    let out = bash.output().unwrap_or_else(|e| panic!("{place}: bash: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let statuses: Vec<u16> =
        stderr.lines().filter_map(|l| l.strip_prefix("@@status ")).map(|s| s.trim().parse().unwrap_or(0)).collect();
    let said = || format!("{place}: {text}\nstdout: {stdout}\nstderr: {stderr}");
    let code = out.status.code();
    let cut_stream = stream && code == Some(28) && statuses == [200];
    assert!(code == Some(0) || cut_stream, "exit {code:?}\n{}", said());
    assert!(!statuses.is_empty(), "no curl ran\n{}", said());
    let expected = expected_status(&cmd.comment);
    for &status in &statuses {
        match &expected {
            Some((want, _)) => assert_eq!(status, *want, "{}", said()),
            None => assert!((100..400).contains(&status), "status {status}\n{}", said()),
        }
    }
    if let Some((_, Some(problem))) = &expected {
        let body: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_default();
        assert_eq!(body["code"], problem.as_str(), "{}", said());
    }
    answers.learn(&stdout);
    if let Ok(index) = serde_json::from_str::<serde_json::Value>(&stdout)
        && index["state"] == "building"
        && let (Some(table), Some(name)) = (index["table"].as_str(), index["name"].as_str())
    {
        wait_for_index(&address, table, name, place);
    }
    statuses.len()
}

/// Reads an index until it is no longer building.
fn wait_for_index(address: &str, table: &str, name: &str, place: &str) {
    let url = format!("http://{address}/v1/tables/{table}/indexes/{name}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = Command::new("curl").args(["-s", &url]).output().unwrap();
        let def: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if def["state"] != "building" {
            assert_eq!(def["state"], "ready", "{place}: the index {table}/{name} did not get ready: {def}");
            return;
        }
        assert!(Instant::now() < deadline, "{place}: the index {table}/{name} is still building");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The status (and problem code) a command's comment says it answers: `404 document_not_found`,
/// `204`.
fn expected_status(comment: &str) -> Option<(u16, Option<String>)> {
    let mut words = comment.split_whitespace();
    let status: u16 = words.next()?.parse().ok().filter(|s| (100..600).contains(s))?;
    let code = words
        .next()
        .map(|w| w.trim_end_matches([',', ':', ';']))
        .filter(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
    Some((status, code.map(str::to_owned)))
}

/// `wait_ms=N` cut to 500 ms.
fn cut_wait(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("wait_ms=") {
        out.push_str(&rest[..at + "wait_ms=".len()]);
        rest = rest[at + "wait_ms=".len()..].trim_start_matches(|c: char| c.is_ascii_digit());
        out.push_str("500");
    }
    out.push_str(rest);
    out
}

#[test]
fn commands_are_cut_as_bash_cuts_them() {
    let block = "J='content-type: application/json'\n\
        # a comment line\n\
        curl -s -XPOST localhost:8080/v1/t -H \"$J\" \\\n  -d '{\"a\": 1,\n  \"b\": \"# not a comment\"}'   # 201 created\n\
        printf 'x\\n' |\n  curl -s --data-binary @- localhost:8080/w\n\
        curl -s localhost:8080/w --data-binary @- <<'LINES'\ncpu v=1\nLINES\n\
        createdb mosaic && curl -s localhost:8080/x#frag\n";
    let lines: Vec<(usize, &str)> = block.lines().enumerate().map(|(i, l)| (i + 1, l)).collect();
    let cmds = commands(&lines);
    let shape: Vec<(usize, Vec<&str>, &str)> =
        cmds.iter().map(|c| (c.line, c.programs.iter().map(String::as_str).collect(), c.comment.as_str())).collect();
    assert_eq!(
        shape,
        [
            (1, vec![], ""),
            (3, vec!["curl"], "201 created"),
            (6, vec!["printf", "curl"], ""),
            (8, vec!["curl"], ""),
            (11, vec!["createdb", "curl"], ""),
        ]
    );
    assert!(cmds[1].text.ends_with("\"# not a comment\"}'   # 201 created\n"), "{:?}", cmds[1].text);
    assert_eq!(cmds[3].text, "curl -s localhost:8080/w --data-binary @- <<'LINES'\ncpu v=1\nLINES\n");
    assert_eq!(expected_status("201 created"), Some((201, Some("created".into()))));
    assert_eq!(expected_status("404 document_not_found"), Some((404, Some("document_not_found".into()))));
    assert_eq!(expected_status("204"), Some((204, None)));
    assert_eq!(expected_status("the number the write's answer gave"), None);
    assert_eq!(cut_wait("a?since=1&wait_ms=30000&table=orders"), "a?since=1&wait_ms=500&table=orders");
    let mut answers = Answers::default();
    answers.learn("HTTP/1.1 201 Created\r\netag: \"abc\"\r\n\r\n{\"cursor\":\"c1\"}");
    assert_eq!((answers.etag.as_deref(), answers.cursor.as_deref()), (Some("\"abc\""), Some("c1")));
}
