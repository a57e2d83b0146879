//! tantivy on benches/peers' full-text data set, in-process, for the search group of
//! benches/peers/models.py (built in release by run.py, like the ceiling):
//!
//!     mosaic-tantivy-peer TEXTS INDEX_DIR SECS MIXED KIND=QUERIES...
//!
//! TEXTS is the search group's `id TAB text` file (the texts PostgreSQL loads, the same as the
//! NDJSON mosaicdb imports); INDEX_DIR an empty directory the index is written to; SECS the
//! seconds of each measurement; MIXED the file of the 1-2 word queries (every term required) the
//! c32 row sends to mosaicdb; each KIND=QUERIES one query kind and its file of queries, one a line:
//! `term` and `and` (every word required), `or` (any word), `phrase` (the words in a row), `prefix`
//! (every term starting with the line).
//!
//! The analyzer follows mosaicdb's `fulltext` index as the bench creates it (`language: english`,
//! stemming on, no stop words): words split on what is not alphanumeric, longer than 128 bytes
//! dropped, lowercased, folded to ASCII, stemmed by tantivy's English (Snowball) stemmer.
//! Positions are kept (phrases). The documents are stored (the text) with their number as a fast
//! field (the ids a search returns), so the directory holds what mosaicdb's table does.
//!
//! Builds the index with one writer thread (`writer_with_num_threads(1, ..)`, the doc store
//! compressed on that thread too), commits and waits for merges; then, for each kind, runs every
//! query once (warm-up, the match counts of the first 20), and measures on one thread, for its
//! SECS, top-10 by BM25 with the exact match count (`(TopDocs, Count)`, every match visited) and
//! top-10 alone (TopDocs prunes blocks: block-max WAND); each query is built from its text (analysis,
//! prefix expansion) and returns its 10 ids. Then the MIXED queries on 1 and 2 threads, both ways.
//! Prints one JSON object.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};
use tantivy::collector::{Count, TopDocs};
use tantivy::columnar::Column;
use tantivy::query::{BooleanQuery, Occur, PhraseQuery, Query, TermQuery};
use tantivy::schema::{FAST, Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, TextAnalyzer,
};
use tantivy::{Index, IndexSettings, IndexWriter, Searcher, TantivyDocument, Term};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The indexing memory budget of the one writer thread: the 50k texts fit in one segment.
const WRITER_BUDGET: usize = 100_000_000;
/// mosaicdb's longest token, in bytes after folding (`MAX_TOKEN_BYTES`).
const MAX_TOKEN_BYTES: usize = 128;
/// Queries of each kind whose match counts are reported (compared with mosaicdb's `total`).
const COUNTED: usize = 20;
/// Hits per query.
const TOP: usize = 10;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// What a query line means.
#[derive(Clone, Copy)]
enum Kind {
    /// every word required
    All,
    /// any word
    Any,
    /// the words at consecutive positions
    Phrase,
    /// every indexed term starting with the (folded) line
    Prefix,
}

impl Kind {
    fn of(name: &str) -> Result<Kind> {
        Ok(match name {
            "term" | "and" => Kind::All,
            "or" => Kind::Any,
            "phrase" => Kind::Phrase,
            "prefix" => Kind::Prefix,
            _ => return Err(format!("unknown query kind {name:?}").into()),
        })
    }
}

/// mosaicdb's analysis, as near as tantivy's filters go.
fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .filter(RemoveLongFilter::limit(MAX_TOKEN_BYTES + 1))
        .filter(Stemmer::new(Language::English))
        .build()
}

/// A prefix is folded, not stemmed (as mosaicdb does).
fn folder() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default()).filter(LowerCaser).filter(AsciiFoldingFilter).build()
}

/// One searching thread's state: the searcher, its analyzers and each segment's id column.
struct Search {
    searcher: Searcher,
    body: Field,
    analyzer: TextAnalyzer,
    folder: TextAnalyzer,
    ids: Vec<Column<u64>>,
}

impl Search {
    fn new(searcher: Searcher, body: Field) -> Result<Search> {
        let ids = searcher
            .segment_readers()
            .iter()
            .map(|r| r.fast_fields().u64("id"))
            .collect::<tantivy::Result<Vec<_>>>()?;
        Ok(Search { searcher, body, analyzer: analyzer(), folder: folder(), ids })
    }

    /// The analyzed terms of a text with their positions.
    fn terms(&mut self, text: &str) -> Vec<(usize, Term)> {
        let mut out = Vec::new();
        let mut stream = self.analyzer.token_stream(text);
        while let Some(t) = stream.next() {
            out.push((t.position, Term::from_field_text(self.body, &t.text)));
        }
        out
    }

    fn term_query(term: Term) -> Box<dyn Query> {
        Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs))
    }

    fn boolean(terms: Vec<Term>, occur: Occur) -> Box<dyn Query> {
        if terms.len() == 1 {
            return Self::term_query(terms.into_iter().next().expect("one term"));
        }
        Box::new(BooleanQuery::new(terms.into_iter().map(|t| (occur, Self::term_query(t))).collect()))
    }

    /// Every indexed term starting with the folded prefix, over every segment.
    fn expand(&mut self, prefix: &str) -> Result<Vec<Term>> {
        let mut folded = String::new();
        let mut stream = self.folder.token_stream(prefix);
        while let Some(t) = stream.next() {
            folded.push_str(&t.text);
        }
        let mut found: Vec<Vec<u8>> = Vec::new();
        for reader in self.searcher.segment_readers() {
            let index = reader.inverted_index(self.body)?;
            let mut terms = index.terms().range().ge(folded.as_bytes()).into_stream()?;
            while terms.advance() {
                if !terms.key().starts_with(folded.as_bytes()) {
                    break;
                }
                found.push(terms.key().to_vec());
            }
        }
        found.sort_unstable();
        found.dedup();
        Ok(found.iter().map(|t| Term::from_field_bytes(self.body, t)).collect())
    }

    /// The query a line of `kind` means.
    fn query(&mut self, kind: Kind, text: &str) -> Result<Box<dyn Query>> {
        let plain = |terms: Vec<(usize, Term)>| terms.into_iter().map(|(_, t)| t).collect::<Vec<_>>();
        Ok(match kind {
            Kind::All => Self::boolean(plain(self.terms(text)), Occur::Must),
            Kind::Any => Self::boolean(plain(self.terms(text)), Occur::Should),
            Kind::Phrase => {
                let terms = self.terms(text);
                if terms.len() == 1 {
                    Self::boolean(plain(terms), Occur::Must)
                } else {
                    let first = terms.first().map_or(0, |(p, _)| *p);
                    Box::new(PhraseQuery::new_with_offset(terms.into_iter().map(|(p, t)| (p - first, t)).collect()))
                }
            }
            Kind::Prefix => Self::boolean(self.expand(text)?, Occur::Should),
        })
    }

    /// One search: the ids of the top 10 by BM25, and the exact number of matches when `count`.
    fn run(&mut self, kind: Kind, text: &str, count: bool) -> Result<(Vec<u64>, Option<usize>)> {
        let query = self.query(kind, text)?;
        let top = TopDocs::with_limit(TOP).order_by_score();
        let (hits, total) = if count {
            let (hits, total) = self.searcher.search(&query, &(top, Count))?;
            (hits, Some(total))
        } else {
            (self.searcher.search(&query, &top)?, None)
        };
        let ids =
            hits.iter().map(|(_, a)| self.ids[a.segment_ord as usize].first(a.doc_id).unwrap_or(u64::MAX)).collect();
        Ok((ids, total))
    }
}

/// Queries per second of `queries`, each built and run in turn (every thread from its own place
/// in the list) for `secs`; on one thread also the mean, p50 and p99 microseconds.
fn measure(
    searcher: &Searcher,
    body: Field,
    kind: Kind,
    queries: &[String],
    count: bool,
    threads: usize,
    secs: f64,
) -> Result<Value> {
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    let runs: Vec<Result<(usize, Vec<f64>)>> = thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || -> Result<(usize, Vec<f64>)> {
                    let mut search = Search::new(searcher.clone(), body)?;
                    let (mut done, mut micros) = (0usize, Vec::new());
                    let mut i = t * queries.len() / threads;
                    loop {
                        let t0 = Instant::now();
                        if t0 >= deadline {
                            return Ok((done, micros));
                        }
                        std::hint::black_box(search.run(kind, &queries[i % queries.len()], count)?);
                        if threads == 1 {
                            micros.push(t0.elapsed().as_secs_f64() * 1e6);
                        }
                        done += 1;
                        i += 1;
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a search thread panicked".into()))).collect()
    });
    let took = start.elapsed().as_secs_f64();
    let (mut done, mut micros) = (0, Vec::new());
    for r in runs {
        let (d, m) = r?;
        done += d;
        micros.extend(m);
    }
    let mut out = json!({"qps": done as f64 / took, "queries": done});
    if !micros.is_empty() {
        let mean = micros.iter().sum::<f64>() / micros.len() as f64;
        micros.sort_by(f64::total_cmp);
        let at = |q: f64| micros[((micros.len() - 1) as f64 * q).round() as usize];
        out["mean_us"] = json!(mean);
        out["p50_us"] = json!(at(0.5));
        out["p99_us"] = json!(at(0.99));
    }
    Ok(out)
}

fn lines(path: &str) -> Result<Vec<String>> {
    Ok(fs::read_to_string(path)?.lines().filter(|l| !l.trim().is_empty()).map(str::to_owned).collect())
}

/// Bytes of the files in `dir` by extension (`idx`, `pos`, `term`, `fieldnorm`, `store`, `fast`,
/// …; `json` for meta.json), and their total.
fn sizes(dir: &Path) -> Result<(u64, BTreeMap<String, u64>)> {
    let (mut total, mut by) = (0, BTreeMap::new());
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        if !meta.is_file() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let ext = name.rsplit_once('.').map_or("", |(_, e)| e).to_owned();
        total += meta.len();
        *by.entry(ext).or_insert(0) += meta.len();
    }
    Ok((total, by))
}

fn peak_rss_bytes() -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 {
        return Err("usage: mosaic-tantivy-peer TEXTS INDEX_DIR SECS MIXED KIND=QUERIES...".into());
    }
    let (texts, dir, secs, mixed) = (&args[1], Path::new(&args[2]), args[3].parse::<f64>()?, lines(&args[4])?);
    let mut kinds = Vec::new();
    for a in &args[5..] {
        let (name, path) = a.split_once('=').ok_or_else(|| format!("{a:?}: not KIND=QUERIES"))?;
        kinds.push((name.to_owned(), Kind::of(name)?, lines(path)?));
    }

    let mut schema = Schema::builder();
    let id = schema.add_u64_field("id", FAST);
    let indexing = TextFieldIndexing::default()
        .set_tokenizer("mosaic_english")
        .set_index_option(IndexRecordOption::WithFreqsAndPositions);
    let body = schema.add_text_field("body", TextOptions::default().set_indexing_options(indexing).set_stored());

    let t0 = Instant::now();
    let settings = IndexSettings { docstore_compress_dedicated_thread: false, ..IndexSettings::default() };
    let index = Index::builder().schema(schema.build()).settings(settings).create_in_dir(dir)?;
    index.tokenizers().register("mosaic_english", analyzer());
    let mut writer: IndexWriter = index.writer_with_num_threads(1, WRITER_BUDGET)?;
    let mut docs = 0u64;
    for line in BufReader::new(fs::File::open(texts)?).lines() {
        let line = line?;
        let (key, text) = line.split_once('\t').ok_or("a line without a tab")?;
        let number: u64 = key.trim_start_matches(|c: char| !c.is_ascii_digit()).parse()?;
        let mut doc = TantivyDocument::new();
        doc.add_u64(id, number);
        doc.add_text(body, text);
        writer.add_document(doc)?;
        docs += 1;
    }
    writer.commit()?;
    writer.wait_merging_threads()?;
    let build_s = t0.elapsed().as_secs_f64();

    let reader = index.reader()?;
    let searcher = reader.searcher();
    let (total, by_ext) = sizes(dir)?;
    let postings: u64 = ["idx", "pos", "term", "fieldnorm"].iter().filter_map(|e| by_ext.get(*e)).sum();

    let mut by_kind = serde_json::Map::new();
    for (name, kind, queries) in &kinds {
        let mut search = Search::new(searcher.clone(), body)?;
        let mut counts = Vec::new();
        for (i, q) in queries.iter().enumerate() {
            let (_, total) = search.run(*kind, q, true)?;
            if i < COUNTED {
                counts.push(total.unwrap_or(0));
            }
        }
        let exact = measure(&searcher, body, *kind, queries, true, 1, secs)?;
        let top = measure(&searcher, body, *kind, queries, false, 1, secs)?;
        by_kind.insert(name.clone(), json!({"count": exact, "top10": top, "counts": counts}));
    }
    let mut by_threads = serde_json::Map::new();
    for threads in [1, 2] {
        let exact = measure(&searcher, body, Kind::All, &mixed, true, threads, secs)?;
        let top = measure(&searcher, body, Kind::All, &mixed, false, threads, secs)?;
        by_threads.insert(threads.to_string(), json!({"count": exact, "top10": top}));
    }

    let out = json!({
        "tantivy": "0.27",
        "docs": docs,
        "build": docs as f64 / build_s,
        "build_s": build_s,
        "writer_threads": 1,
        "writer_budget": WRITER_BUDGET,
        "segments": searcher.segment_readers().len(),
        "bytes": total,
        "postings_bytes": postings,
        "by_ext": by_ext,
        "kinds": by_kind,
        "mixed": by_threads,
        "rss": peak_rss_bytes(),
    });
    println!("{out}");
    Ok(())
}
