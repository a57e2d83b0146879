//! What a document holds in a fulltext index, and the stored forms: posting blocks (`ftidx`
//! values) and length records (`ftdlen` values).
//!
//! A block is a head, `n`, then `n` entries in `_id` order; the head is a 0 byte (a block of the
//! first layout, which had none, starts with `n`, never 0), a count `k` ≤ 4 and `k` pairs
//! `(tf, length)`: the entries' (largest frequency in a field, document length) that no other
//! entry beats on both (see [`BlockBound`]). They bound the BM25 contribution of every posting
//! of the block, so a top-k search can pass over a block without
//! decoding it (see `search::daat`). An entry is `entry_len` then
//! `id_len id doc_len field_count (field tf positions_len positions…)…`, all LEB128 varints,
//! positions delta-coded. The lengths let a reader skip what it does not need: scoring reads no
//! positions, removing a document decodes no fields. A length record is `doc_len block token_count (token_len token)…`: the document's
//! length, the block number of the write that indexed it (0 while that write is still running),
//! and its distinct tokens, so removing it needs no new analysis of the old document.

use super::analyzer::Analyzer;
use crate::catalog::IndexDef;
use crate::entity::{self, FieldDict, ValueRef, varint};
use crate::service::{Result, ServiceError};

/// The fields of one token in one document: `(field number, positions)`.
pub type FieldHits = super::analyzer::FieldPositions;

/// A document analyzed for one index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocTerms {
    /// tokens over every indexed field (BM25's `len(d)`)
    pub len: u64,
    /// each distinct token's fields and positions, in token order
    pub terms: Vec<(String, FieldHits)>,
}

/// A document's postings for one index, encoded (before the write where the write path can):
/// its length and one block entry per token, in token order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocPostings {
    /// the document's length
    pub len: u64,
    /// `(token, encoded entry)`
    pub entries: Vec<(String, Vec<u8>)>,
    /// each entry's largest term frequency in a field (with `len`, its pair in a block head),
    /// known here so the committer need not parse the entries again
    pub tfs: Vec<u32>,
}

impl DocPostings {
    /// The entries of document `id` with these terms.
    pub fn encode(id: &str, terms: DocTerms) -> DocPostings {
        let mut scratch = Vec::new();
        let tfs = terms
            .terms
            .iter()
            .map(|(_, hits)| hits.iter().map(|(_, p)| u32::try_from(p.len()).unwrap_or(u32::MAX)).max().unwrap_or(0))
            .collect();
        let entries = terms
            .terms
            .into_iter()
            .map(|(token, hits)| {
                let mut entry = Vec::with_capacity(id.len() + 8 + hits.iter().map(|(_, p)| 3 + p.len()).sum::<usize>());
                encode_entry_with(&mut entry, id, terms.len, &hits, &mut scratch);
                (token, entry)
            })
            .collect();
        DocPostings { len: terms.len, entries, tfs }
    }
}

fn damaged(what: &str) -> ServiceError {
    ServiceError::Internal(format!("a damaged full-text {what}"))
}

/// The indexed text of one field of a stored document: its string, or its array's strings
/// (anything else holds none).
pub fn texts<'a>(blob: &'a [u8], dict: &FieldDict, field: &str) -> Result<Vec<&'a str>> {
    let path: Vec<&str> = field.split('.').collect();
    Ok(match entity::get_path(blob, dict, &path)? {
        Some(ValueRef::Str(s)) => vec![s],
        Some(ValueRef::Array(a)) => {
            let mut out = Vec::new();
            for v in a.iter() {
                if let ValueRef::Str(s) = v? {
                    out.push(s);
                }
            }
            out
        }
        _ => Vec::new(),
    })
}

/// Analyzes the indexed fields of a stored document: strings and the string elements of arrays;
/// anything else is skipped.
pub fn analyze(def: &IndexDef, analyzer: &Analyzer, blob: &[u8], dict: &FieldDict) -> Result<DocTerms> {
    let mut fields = Vec::with_capacity(def.fields.len());
    for (field_no, field) in def.fields.iter().enumerate() {
        fields.push((u16::try_from(field_no).unwrap_or(u16::MAX), texts(blob, dict, field)?));
    }
    let (len, terms) = analyzer.document(&fields);
    Ok(DocTerms { len, terms })
}

/// Appends one block entry.
pub fn encode_entry(out: &mut Vec<u8>, id: &str, len: u64, hits: &FieldHits) {
    encode_entry_with(out, id, len, hits, &mut Vec::new());
}

/// Appends one block entry, using `body` as scratch space (reused across entries).
pub fn encode_entry_with(out: &mut Vec<u8>, id: &str, len: u64, hits: &FieldHits, body: &mut Vec<u8>) {
    body.clear();
    varint::write(body, id.len() as u64);
    body.extend_from_slice(id.as_bytes());
    varint::write(body, len);
    varint::write(body, hits.len() as u64);
    for (field, positions) in hits {
        varint::write(body, u64::from(*field));
        varint::write(body, positions.len() as u64);
        // the positions' byte length comes first: encode them after a one-byte slot, and move
        // them if the length needs more bytes
        let slot = body.len();
        body.push(0);
        let mut last = 0u32;
        for &p in positions {
            varint::write(body, u64::from(p.saturating_sub(last)));
            last = p;
        }
        let plen = (body.len() - slot - 1) as u64;
        if plen < 0x80 {
            body[slot] = plen as u8;
        } else {
            let mut prefix = Vec::with_capacity(4);
            varint::write(&mut prefix, plen);
            body.splice(slot..=slot, prefix);
        }
    }
    varint::write(out, body.len() as u64);
    out.extend_from_slice(body);
}

/// The first byte of a block with a head (see the module doc).
const HEADED: u8 = 0;

/// Most `(tf, length)` pairs a block's head keeps.
pub const BOUND_PAIRS: usize = 4;

/// What bounds the score of every posting of a block: the `(term frequency, document length)`
/// pairs no other entry beats on both (the largest frequency in any one field of the entry, and
/// its length), at most [`BOUND_PAIRS`] of them (neighbours merged into their largest frequency
/// and shortest length). BM25's term part grows with the frequency and shrinks with the length,
/// so the largest `tf_part` over the pairs, times the index's summed field weights and the term's
/// idf, is at least any posting's contribution — and for a one-field index of few pairs, exactly
/// the block's best (Lucene keeps such pairs as "impacts").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockBound {
    pairs: [(u32, u64); BOUND_PAIRS],
    count: usize,
}

impl BlockBound {
    /// The pairs, largest frequency first.
    pub fn pairs(&self) -> &[(u32, u64)] {
        &self.pairs[..self.count]
    }

    /// The largest `f(tf, length)` over the pairs (0 without any).
    pub fn max_of(&self, f: impl Fn(u32, u64) -> f64) -> f64 {
        self.pairs().iter().map(|&(tf, len)| f(tf, len)).fold(0.0, f64::max)
    }

    /// The bound of entries with these `(tf, length)` pairs.
    fn of(mut each: Vec<(u32, u64)>) -> BlockBound {
        each.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        // the front: by falling frequency, each kept pair shorter than every one kept before
        let mut front: Vec<(u32, u64)> = Vec::new();
        for p in each {
            if front.last().is_none_or(|l| p.1 < l.1) {
                front.push(p);
            }
        }
        let mut out = BlockBound { pairs: [(0, 0); BOUND_PAIRS], count: 0 };
        for group in front.chunks(front.len().div_ceil(BOUND_PAIRS).max(1)) {
            let tf = group.iter().map(|p| p.0).max().unwrap_or(0);
            let len = group.iter().map(|p| p.1).min().unwrap_or(0);
            out.pairs[out.count] = (tf, len);
            out.count += 1;
        }
        out
    }
}

/// The `(largest tf in a field, length)` pair of one encoded entry (as [`encode_entry_with`]
/// writes it).
fn entry_pair(raw: &[u8]) -> Result<(u32, u64)> {
    let mut c = Cursor(raw);
    let body_len = c.num()?;
    let mut body = Cursor(c.bytes(body_len)?);
    let id_len = body.num()?;
    body.bytes(id_len)?;
    let len = body.num()?;
    let mut max_tf = 0u32;
    for _ in 0..body.num()? {
        body.num()?;
        max_tf = max_tf.max(u32::try_from(body.num()?).map_err(|_| damaged("posting"))?);
        let plen = body.num()?;
        body.bytes(plen)?;
    }
    Ok((max_tf, len))
}

/// The bound of a block of these entries.
fn bound_of<'a>(entries: impl Iterator<Item = &'a [u8]>) -> Result<BlockBound> {
    Ok(BlockBound::of(entries.map(entry_pair).collect::<Result<Vec<_>>>()?))
}

/// A block of `entries` (already encoded, in id order), with its head.
pub fn encode_block<'a>(entries: impl ExactSizeIterator<Item = &'a [u8]> + Clone) -> Result<Vec<u8>> {
    let bound = bound_of(entries.clone())?;
    Ok(assemble(bound, entries))
}

/// A block of `entries` (already encoded, in id order) whose `(tf, length)` pairs are known.
pub fn encode_block_with_pairs<'a>(
    entries: impl ExactSizeIterator<Item = &'a [u8]> + Clone,
    pairs: Vec<(u32, u64)>,
) -> Vec<u8> {
    assemble(BlockBound::of(pairs), entries)
}

fn assemble<'a>(bound: BlockBound, entries: impl ExactSizeIterator<Item = &'a [u8]> + Clone) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + entries.clone().map(<[u8]>::len).sum::<usize>());
    out.push(HEADED);
    varint::write(&mut out, bound.count as u64);
    for &(tf, len) in bound.pairs() {
        varint::write(&mut out, u64::from(tf));
        varint::write(&mut out, len);
    }
    varint::write(&mut out, entries.len() as u64);
    for e in entries {
        out.extend_from_slice(e);
    }
    out
}

/// A block's head: its bound (none in a block of the first layout), its entry count, and the
/// bytes of its entries.
pub fn block_head(bytes: &[u8]) -> Result<(Option<BlockBound>, u64, &[u8])> {
    let mut c = Cursor(bytes);
    let bound = if bytes.first() == Some(&HEADED) {
        c.0 = &bytes[1..];
        let count = usize::try_from(c.num()?).ok().filter(|n| *n <= BOUND_PAIRS);
        let count = count.ok_or_else(|| damaged("posting block"))?;
        let mut b = BlockBound { pairs: [(0, 0); BOUND_PAIRS], count };
        for pair in &mut b.pairs[..count] {
            *pair = (u32::try_from(c.num()?).map_err(|_| damaged("posting block"))?, c.num()?);
        }
        Some(b)
    } else {
        None
    };
    let n = c.num()?;
    Ok((bound, n, c.0))
}

/// True when a block's head states exactly its entries' bound (or it has no head).
pub fn head_is_exact(bytes: &[u8]) -> Result<bool> {
    let (bound, _, _) = block_head(bytes)?;
    let Some(bound) = bound else { return Ok(true) };
    Ok(bound_of(decode_block(bytes)?.iter().map(|p| p.raw))? == bound)
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    /// The next varint. Most are one byte (lengths, counts, field numbers, position gaps): those
    /// are read inline, the profile's hottest path in scoring.
    #[inline]
    fn num(&mut self) -> Result<u64> {
        if let Some((&b, rest)) = self.0.split_first()
            && b < 0x80
        {
            self.0 = rest;
            return Ok(u64::from(b));
        }
        let (v, n) = varint::read(self.0).map_err(|_| damaged("posting"))?;
        self.0 = self.0.get(n..).ok_or_else(|| damaged("posting"))?;
        Ok(v)
    }

    fn bytes(&mut self, len: u64) -> Result<&'a [u8]> {
        let len = usize::try_from(len).map_err(|_| damaged("posting"))?;
        let (head, rest) = self.0.split_at_checked(len).ok_or_else(|| damaged("posting"))?;
        self.0 = rest;
        Ok(head)
    }
}

/// One field of a posting.
#[derive(Debug, Clone, Copy)]
pub struct FieldPosting<'a> {
    /// the field's number in the index definition
    pub field: u16,
    /// term frequency in that field
    pub tf: u32,
    positions: &'a [u8],
}

impl FieldPosting<'_> {
    /// The positions, ascending.
    pub fn positions(&self) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(self.tf as usize);
        self.positions_into(&mut out)?;
        Ok(out)
    }

    /// The positions, ascending, into `out` (cleared first).
    pub fn positions_into(&self, out: &mut Vec<u32>) -> Result<()> {
        out.clear();
        let mut c = Cursor(self.positions);
        let mut last = 0u64;
        while !c.0.is_empty() {
            last += c.num()?;
            out.push(u32::try_from(last).map_err(|_| damaged("posting"))?);
        }
        Ok(())
    }
}

/// One document's entry of a block, borrowed from the block bytes.
#[derive(Debug, Clone, Copy)]
pub struct Posting<'a> {
    /// the document id (UTF-8: checked where it is used as text, see [`Posting::id_str`], not
    /// for every posting scored)
    pub id: &'a [u8],
    /// the document's length
    pub len: u64,
    /// how many fields follow
    field_count: u64,
    /// the encoded fields
    field_bytes: &'a [u8],
    /// the entry's encoded bytes (with its length)
    pub raw: &'a [u8],
}

impl<'a> Posting<'a> {
    /// The document id as text.
    pub fn id_str(&self) -> Result<&'a str> {
        std::str::from_utf8(self.id).map_err(|_| damaged("posting"))
    }

    /// Calls `f` with each field of the posting.
    pub fn fields(&self, mut f: impl FnMut(FieldPosting<'a>)) -> Result<()> {
        let mut c = Cursor(self.field_bytes);
        for _ in 0..self.field_count {
            let field = u16::try_from(c.num()?).map_err(|_| damaged("posting"))?;
            let tf = u32::try_from(c.num()?).map_err(|_| damaged("posting"))?;
            let plen = c.num()?;
            f(FieldPosting { field, tf, positions: c.bytes(plen)? });
        }
        if !c.0.is_empty() {
            return Err(damaged("posting"));
        }
        Ok(())
    }

    /// The fields as a list.
    pub fn field_list(&self) -> Result<Vec<FieldPosting<'a>>> {
        let mut out = Vec::new();
        self.fields(|f| out.push(f))?;
        Ok(out)
    }
}

/// How many documents a block holds (read from its head).
pub fn block_len(bytes: &[u8]) -> Result<u64> {
    Ok(block_head(bytes)?.1)
}

/// Decodes a block (each entry's fields are read on demand, see [`Posting::fields`]).
pub fn decode_block(bytes: &[u8]) -> Result<Vec<Posting<'_>>> {
    let (_, n, entries) = block_head(bytes)?;
    let mut c = Cursor(entries);
    let mut out = Vec::with_capacity(usize::try_from(n.min(4096)).unwrap_or(0));
    for _ in 0..n {
        let start = c.0;
        let body_len = c.num()?;
        let mut body = Cursor(c.bytes(body_len)?);
        let raw = &start[..start.len() - c.0.len()];
        let id_len = body.num()?;
        let id = body.bytes(id_len)?;
        let len = body.num()?;
        let field_count = body.num()?;
        out.push(Posting { id, len, field_count, field_bytes: body.0, raw });
    }
    if !c.0.is_empty() {
        return Err(damaged("posting block"));
    }
    Ok(out)
}

/// A decoded length record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LenRecord {
    /// the document's length
    pub len: u64,
    /// the block number of the write that indexed it; 0 while that write runs
    pub block: u64,
    /// its distinct tokens, sorted
    pub tokens: Vec<String>,
}

impl LenRecord {
    /// The stored form.
    pub fn encode(&self) -> Vec<u8> {
        Self::encode_parts(self.len, self.block, &self.tokens)
    }

    /// The stored form of a record with these parts (no record built).
    pub fn encode_parts<T: AsRef<str>>(len: u64, block: u64, tokens: &[T]) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + tokens.iter().map(|t| t.as_ref().len() + 1).sum::<usize>());
        varint::write(&mut out, len);
        varint::write(&mut out, block);
        varint::write(&mut out, tokens.len() as u64);
        for t in tokens {
            varint::write(&mut out, t.as_ref().len() as u64);
            out.extend_from_slice(t.as_ref().as_bytes());
        }
        out
    }

    /// Parses the stored form.
    pub fn decode(bytes: &[u8]) -> Result<LenRecord> {
        let mut c = Cursor(bytes);
        let (len, block, n) = (c.num()?, c.num()?, c.num()?);
        let mut tokens = Vec::with_capacity(usize::try_from(n.min(4096)).unwrap_or(0));
        for _ in 0..n {
            let l = c.num()?;
            tokens.push(String::from_utf8(c.bytes(l)?.to_vec()).map_err(|_| damaged("length record"))?);
        }
        if !c.0.is_empty() {
            return Err(damaged("length record"));
        }
        Ok(LenRecord { len, block, tokens })
    }
}

/// `N` and the total length of an index (`ftstat` value: two u64 BE).
pub fn decode_stat(bytes: Option<&[u8]>) -> (u64, u64) {
    match bytes {
        Some(b) if b.len() == 16 => {
            let (n, total) = b.split_at(8);
            (
                u64::from_be_bytes(n.try_into().unwrap_or_default()),
                u64::from_be_bytes(total.try_into().unwrap_or_default()),
            )
        }
        _ => (0, 0),
    }
}

/// The stored form of `N` and the total length.
pub fn encode_stat(n: u64, total: u64) -> Vec<u8> {
    let mut out = n.to_be_bytes().to_vec();
    out.extend_from_slice(&total.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn blocks_round_trip(docs in proptest::collection::btree_map(
            "[a-z/:]{1,8}",
            (0u64..10_000, proptest::collection::vec((0u16..4, proptest::collection::btree_set(0u32..100_000, 1..8)), 1..4)),
            1..20,
        )) {
            let mut entries = Vec::new();
            for (id, (len, hits)) in &docs {
                let hits: FieldHits = hits.iter().map(|(f, p)| (*f, p.iter().copied().collect())).collect();
                let mut e = Vec::new();
                encode_entry(&mut e, id, *len, &hits);
                entries.push(e);
            }
            let block = encode_block(entries.iter().map(Vec::as_slice)).unwrap();
            prop_assert!(head_is_exact(&block).unwrap());
            let (bound, n, _) = block_head(&block).unwrap();
            let bound = bound.unwrap();
            prop_assert_eq!(n as usize, docs.len());
            // at any average length, the bound is at least every entry's term part, and exactly
            // the best one's while the front fits the head (surely so for at most 4 entries)
            for avg in [1.0, 37.5, 5000.0] {
                let part = |tf: u32, len: u64| {
                    let norm = len as f64 / avg;
                    f64::from(tf) * 2.2 / (f64::from(tf) + 1.2 * (0.25 + 0.75 * norm))
                };
                let best = docs
                    .values()
                    .map(|(len, h)| part(h.iter().map(|(_, p)| p.len() as u32).max().unwrap(), *len))
                    .fold(0.0, f64::max);
                let got = bound.max_of(part);
                prop_assert!(got >= best);
                if docs.len() <= BOUND_PAIRS {
                    prop_assert_eq!(got, best);
                }
            }
            let decoded = decode_block(&block).unwrap();
            prop_assert_eq!(decoded.len(), docs.len());
            for (p, (id, (len, hits))) in decoded.iter().zip(&docs) {
                prop_assert_eq!(p.id, id.as_bytes());
                prop_assert_eq!(p.len, *len);
                let fields = p.field_list().unwrap();
                prop_assert_eq!(fields.len(), hits.len());
                for (fp, (f, positions)) in fields.iter().zip(hits) {
                    prop_assert_eq!(fp.field, *f);
                    prop_assert_eq!(fp.tf as usize, positions.len());
                    prop_assert_eq!(fp.positions().unwrap(), positions.iter().copied().collect::<Vec<_>>());
                }
            }
            // entries re-assembled from their raw bytes give the same block
            let again = encode_block(decoded.iter().map(|p| p.raw)).unwrap();
            prop_assert_eq!(again, block);
        }

        #[test]
        fn damaged_blocks_are_errors_not_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(block) = decode_block(&bytes) {
                for p in block {
                    let _ = p.fields(|f| { let _ = f.positions(); });
                }
            }
            let _ = LenRecord::decode(&bytes);
        }
    }

    #[test]
    fn long_position_lists_and_blocks_of_the_first_layout_round_trip() {
        let positions: Vec<u32> = (0..300).map(|i| i * 1000).collect();
        let hits: FieldHits = vec![(0, vec![3]), (1, positions.clone()), (2, vec![7, 9])];
        let mut block = Vec::new();
        // the first layout: no head, the count first
        varint::write(&mut block, 2);
        let mut scratch = Vec::new();
        encode_entry_with(&mut block, "a", 301, &hits, &mut scratch);
        encode_entry_with(&mut block, "b", 1, &vec![(0, vec![0])], &mut scratch);
        let decoded = decode_block(&block).unwrap();
        let fields = decoded[0].field_list().unwrap();
        assert_eq!(fields[1].positions().unwrap(), positions);
        assert_eq!(fields[2].positions().unwrap(), vec![7, 9]);
        assert_eq!(decoded[1].id, b"b");
        assert_eq!(block_len(&block).unwrap(), 2);
        assert!(block_head(&block).unwrap().0.is_none() && head_is_exact(&block).unwrap());
        let headed = encode_block(decoded.iter().map(|p| p.raw)).unwrap();
        // a has tf 300 at length 301, b tf 1 at length 1: neither beats the other on both
        assert_eq!(block_head(&headed).unwrap().0.unwrap().pairs(), [(300, 301), (1, 1)]);
        assert_eq!(decode_block(&headed).unwrap().len(), 2);
    }

    #[test]
    fn length_records_round_trip() {
        let r = LenRecord { len: 42, block: 7, tokens: vec!["a".into(), "graph".into()] };
        assert_eq!(LenRecord::decode(&r.encode()).unwrap(), r);
        assert_eq!(decode_stat(Some(&encode_stat(3, 99))), (3, 99));
    }
}
