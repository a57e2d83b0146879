//! The control file's commands and status line.
//!
//! Kept apart from the FUSE glue so the command grammar can be unit tested.

/// Faults, limits and counters set through `.powerfs`.
#[derive(Default, Debug)]
pub struct Control {
    /// Bytes of file data the FS holds at most.
    pub capacity: Option<u64>,
    pub fail_fsync: Option<i32>,
    pub fail_write: Option<i32>,
    /// Reads of a file whose path contains this fail with EIO.
    pub fail_read: Option<String>,
    /// Fsyncs are deferred until release.
    pub held: bool,
    pub fsyncs: u64,
    pub fsyncdirs: u64,
    pub cuts: u64,
    pub injected: u64,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Cut,
    HoldFsync,
    ReleaseFsync,
    Capacity(Option<u64>),
    FailFsync(Option<i32>),
    FailWrite(Option<i32>),
    FailRead(Option<String>),
    Flip(String, u64),
}

fn errno_arg(arg: &str) -> Result<Option<i32>, i32> {
    match arg {
        "enospc" => Ok(Some(libc::ENOSPC)),
        "eio" => Ok(Some(libc::EIO)),
        "off" => Ok(None),
        _ => Err(libc::EINVAL),
    }
}

fn errno_name(e: Option<i32>) -> &'static str {
    match e {
        None => "off",
        Some(libc::ENOSPC) => "enospc",
        Some(libc::EIO) => "eio",
        Some(_) => "other",
    }
}

/// Parses one command line; an unknown or malformed one is EINVAL.
pub fn parse(line: &str) -> Result<Command, i32> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let num = |n: &str| n.parse::<u64>().map_err(|_| libc::EINVAL);
    // Exact arity: a trailing word is a typo the driver should hear about.
    Ok(match words.as_slice() {
        ["cut"] => Command::Cut,
        ["hold-fsync"] => Command::HoldFsync,
        ["release-fsync"] => Command::ReleaseFsync,
        ["capacity", "off"] => Command::Capacity(None),
        ["capacity", n] => Command::Capacity(Some(num(n)?)),
        ["fail-fsync", e] => Command::FailFsync(errno_arg(e)?),
        ["fail-write", e] => Command::FailWrite(errno_arg(e)?),
        ["fail-read", "off"] => Command::FailRead(None),
        ["fail-read", "eio", sub] => Command::FailRead(Some((*sub).to_owned())),
        ["flip", path, off] => Command::Flip((*path).to_owned(), num(off)?),
        _ => return Err(libc::EINVAL),
    })
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl Control {
    /// One JSON line describing the filesystem.
    pub fn status(&self, mode: &str, used: u64, pending: usize, inodes: usize) -> String {
        let opt = |v: Option<u64>| v.map_or("null".to_owned(), |n| n.to_string());
        format!(
            "{{\"mode\":\"{mode}\",\"used\":{used},\"capacity\":{},\"fsyncs\":{},\
             \"fsyncdirs\":{},\"cuts\":{},\"injected\":{},\"held\":{},\"pending\":{pending},\"inodes\":{inodes},\
             \"fail_fsync\":\"{}\",\"fail_write\":\"{}\",\"fail_read\":{}}}\n",
            opt(self.capacity),
            self.fsyncs,
            self.fsyncdirs,
            self.cuts,
            self.injected,
            self.held,
            errno_name(self.fail_fsync),
            errno_name(self.fail_write),
            self.fail_read.as_deref().map_or("null".to_owned(), json_str),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commands() {
        assert_eq!(parse("cut"), Ok(Command::Cut));
        assert_eq!(parse("capacity 4096"), Ok(Command::Capacity(Some(4096))));
        assert_eq!(parse("capacity off"), Ok(Command::Capacity(None)));
        assert_eq!(parse("fail-fsync enospc"), Ok(Command::FailFsync(Some(libc::ENOSPC))));
        assert_eq!(parse("fail-read eio journal"), Ok(Command::FailRead(Some("journal".into()))));
        assert_eq!(parse("flip data/a 7"), Ok(Command::Flip("data/a".into(), 7)));
        assert_eq!(parse("cutt"), Err(libc::EINVAL));
        assert_eq!(parse("fail-write maybe"), Err(libc::EINVAL));
        assert_eq!(parse("cut now"), Err(libc::EINVAL));
    }

    #[test]
    fn status_is_one_json_line() {
        let c = Control { fail_read: Some("a\"b".into()), ..Control::default() };
        let s = c.status("data", 5, 0, 1);
        assert!(s.ends_with("}\n") && s.matches('\n').count() == 1);
        assert!(s.contains("\"fail_read\":\"a\\\"b\""));
        assert!(s.contains("\"capacity\":null"));
    }
}
