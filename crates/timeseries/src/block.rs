//! The codec of a compressed block of time-series points: the points of one series, `(ts, value)`
//! with `ts` in nanoseconds and strictly increasing, in one value instead of one key per point.
//!
//! # Format (version 1)
//!
//! Integers are big-endian, floats are their IEEE-754 bits as a big-endian `u64`.
//!
//! | offset | bytes | field |
//! | --- | --- | --- |
//! | 0 | 1 | format version, 1 |
//! | 1 | 1 | encoding kind: 0 raw, 1 pco |
//! | 2 | 4 | `count`, u32, 1 ..= [`MAX_BLOCK_POINTS`] |
//! | 6 | 8 | `first`: the first timestamp, i64 |
//! | 14 | 8 | `last`: the last timestamp, i64 |
//! | 22 | 8 | `min` of the values, f64 |
//! | 30 | 8 | `max` of the values, f64 |
//! | 38 | 8 | `sum` of the values, f64 |
//! | 46 | .. | the points |
//!
//! The points of a raw block are `count` times 16 bytes: the timestamp (i64) and the value (f64).
//! Those of a pco block are two length-prefixed pco standalone files: a u32 length and the
//! timestamps compressed as i64, then a u32 length and the values compressed as f64. Nothing follows.
//!
//! The 46-byte header answers count, span and min/max/sum aggregations without decoding points.
//! `min`, `max` and `sum` are what the aggregation ([`super::aggregate`]) computes: start from
//! the first value, then `sum += v`, `min = min.min(v)`, `max = max.max(v)` in time order.
//! The points API accepts only finite values today, but the codec keeps any f64 bit-exactly
//! (NaN payloads, ±inf, -0.0). With such values: `f64::min`/`max` skip NaN, so min/max are NaN
//! only when every value is; `sum` is NaN once any value is NaN or +inf meets -inf (and may
//! overflow to ±inf); the sign of a zero min/max is unspecified, as for `f64::min`.

use pco::standalone::{simple_compress, simple_decompress_into};
use pco::{ChunkConfig, DeltaSpec, ModeSpec};

/// The most points one block holds; it also bounds what decoding a corrupt block allocates.
pub const MAX_BLOCK_POINTS: usize = 65_536;
/// Blocks of fewer points are stored raw without trying pco: its fixed cost (a 27-byte header per
/// column, some 30 more bytes of delta state for the timestamps, the two length prefixes) is
/// 80-90 bytes, 5-6 raw points. Measured: below 8 points pco won only on a constant series (from
/// 6); from 10 it wins on a 2-decimal gauge and a full-precision CPU series (119 and 155 bytes
/// against 160 raw). From 8 on `encode` tries pco and keeps it only if smaller.
const RAW_BELOW: usize = 8;
const VERSION: u8 = 1;
const KIND_RAW: u8 = 0;
const KIND_PCO: u8 = 1;
const HEADER_LEN: usize = 46;
const RAW_POINT_LEN: usize = 16;

/// The fixed header of a block, readable without decoding the points.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockHeader {
    pub count: u32,
    pub first: i64,
    pub last: i64,
    pub min: f64,
    pub max: f64,
    pub sum: f64,
}

/// Why a block could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    #[error("a block needs at least one point")]
    Empty,
    #[error("a block holds at most {MAX_BLOCK_POINTS} points, not {0}")]
    TooManyPoints(usize),
    #[error("the timestamps of a block must strictly increase: point {index} ({ts}) follows {prev}")]
    NotIncreasing { index: usize, prev: i64, ts: i64 },
    #[error("pco could not compress the block: {0}")]
    Compress(String),
    #[error("corrupt time-series block: {0}")]
    Corrupt(String),
}

fn corrupt(what: impl Into<String>) -> BlockError {
    BlockError::Corrupt(what.into())
}

impl BlockHeader {
    /// The header of `points` (None if empty): the aggregation's fold, see the module doc.
    fn of(points: &[(i64, f64)]) -> Option<BlockHeader> {
        let (&(first, v0), rest) = points.split_first()?;
        let mut h = BlockHeader { count: points.len() as u32, first, last: first, min: v0, max: v0, sum: v0 };
        for &(ts, v) in rest {
            h.last = ts;
            h.sum += v;
            h.min = h.min.min(v);
            h.max = h.max.max(v);
        }
        Some(h)
    }

    /// Whether `other` says the same: floats compare as numbers (so ±0 agree, since the sign of
    /// a zero min may differ between builds) with NaN equal to NaN (its payload may differ too).
    fn agrees(&self, other: &BlockHeader) -> bool {
        let floats = |h: &BlockHeader| [h.min, h.max, h.sum].map(|f| (!f.is_nan()).then_some(f));
        (self.count, self.first, self.last, floats(self)) == (other.count, other.first, other.last, floats(other))
    }
}

/// Encodes the points of one series. They must be 1 ..= [`MAX_BLOCK_POINTS`] with strictly
/// increasing timestamps; any value is kept bit-exactly.
pub fn encode(points: &[(i64, f64)]) -> Result<Vec<u8>, BlockError> {
    if points.len() > MAX_BLOCK_POINTS {
        return Err(BlockError::TooManyPoints(points.len()));
    }
    for (index, pair) in points.windows(2).enumerate() {
        if pair[1].0 <= pair[0].0 {
            return Err(BlockError::NotIncreasing { index: index + 1, prev: pair[0].0, ts: pair[1].0 });
        }
    }
    let h = BlockHeader::of(points).ok_or(BlockError::Empty)?;
    let mut out = Vec::with_capacity(HEADER_LEN + points.len() * RAW_POINT_LEN);
    out.extend_from_slice(&[VERSION, KIND_RAW]);
    out.extend_from_slice(&h.count.to_be_bytes());
    for field in [h.first.cast_unsigned(), h.last.cast_unsigned(), h.min.to_bits(), h.max.to_bits(), h.sum.to_bits()] {
        out.extend_from_slice(&field.to_be_bytes());
    }
    if points.len() >= RAW_BELOW
        && let Some(body) = pco_body(points)?
    {
        out[1] = KIND_PCO;
        out.extend_from_slice(&body);
        return Ok(out);
    }
    for &(ts, v) in points {
        out.extend_from_slice(&ts.to_be_bytes());
        out.extend_from_slice(&v.to_bits().to_be_bytes());
    }
    Ok(out)
}

/// The two pco files of a pco block, or None when they would not be smaller than the raw points
/// (incompressible values such as random bits): decoding raw is cheaper, so pco must earn its place.
fn pco_body(points: &[(i64, f64)]) -> Result<Option<Vec<u8>>, BlockError> {
    let ts: Vec<i64> = points.iter().map(|p| p.0).collect();
    let values: Vec<f64> = points.iter().map(|p| p.1).collect();
    // Pco's automatic choices, spelled out, for both columns (measured on timestamps and values):
    // - DeltaSpec::Auto takes consecutive deltas to the order that pays: a regular interval's
    //   timestamps cost some 55 bytes in all, whatever the count.
    // - ModeSpec::Auto finds common multiples: ms-precision timestamps stored in ns (IntMult,
    //   about a third of the Classic size) and decimal values (FloatMult: a 2-decimal gauge
    //   becomes small integers).
    // - Level 8 is pco's default; its docs say 12 is only marginally better, for more time.
    // One chunk (pco's default page is 2^18 numbers, above MAX_BLOCK_POINTS).
    let config = ChunkConfig::default()
        .with_compression_level(pco::DEFAULT_COMPRESSION_LEVEL)
        .with_mode_spec(ModeSpec::Auto)
        .with_delta_spec(DeltaSpec::Auto);
    let compress = |bytes: pco::errors::PcoResult<Vec<u8>>| bytes.map_err(|e| BlockError::Compress(e.to_string()));
    let ts = compress(simple_compress(&ts, &config))?;
    let values = compress(simple_compress(&values, &config))?;
    let len = 8 + ts.len() + values.len();
    if len >= points.len() * RAW_POINT_LEN {
        return Ok(None);
    }
    let mut body = Vec::with_capacity(len);
    for part in [&ts, &values] {
        let n = u32::try_from(part.len()).map_err(|_| BlockError::Compress("a pco file over 4 GiB".into()))?;
        body.extend_from_slice(&n.to_be_bytes());
        body.extend_from_slice(part);
    }
    Ok(Some(body))
}

/// Reads fixed-size fields off the front of a byte string, with an error instead of a panic
/// when it runs out.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], BlockError> {
        let (head, rest) = self.0.split_first_chunk::<N>().ok_or_else(|| corrupt(format!("truncated {what}")))?;
        self.0 = rest;
        Ok(*head)
    }

    fn bytes(&mut self, len: usize, what: &str) -> Result<&'a [u8], BlockError> {
        let (head, rest) = self.0.split_at_checked(len).ok_or_else(|| corrupt(format!("truncated {what}")))?;
        self.0 = rest;
        Ok(head)
    }

    fn f64(&mut self, what: &str) -> Result<f64, BlockError> {
        Ok(f64::from_bits(u64::from_be_bytes(self.array(what)?)))
    }
}

/// Reads and checks the header (version, kind, count, a span that fits the count) and returns it
/// with the encoding kind and the points' bytes.
fn split(bytes: &[u8]) -> Result<(BlockHeader, u8, &[u8]), BlockError> {
    let mut r = Reader(bytes);
    let [version, kind] = r.array("header")?;
    if version != VERSION {
        return Err(corrupt(format!("unknown format version {version}")));
    }
    if kind != KIND_RAW && kind != KIND_PCO {
        return Err(corrupt(format!("unknown encoding kind {kind}")));
    }
    let count = u32::from_be_bytes(r.array("header")?);
    let first = i64::from_be_bytes(r.array("header")?);
    let last = i64::from_be_bytes(r.array("header")?);
    let h = BlockHeader { count, first, last, min: r.f64("header")?, max: r.f64("header")?, sum: r.f64("header")? };
    if count == 0 || count as usize > MAX_BLOCK_POINTS {
        return Err(corrupt(format!("a count of {count} points")));
    }
    // `count` distinct increasing timestamps span at least count - 1 nanoseconds.
    if i128::from(last) - i128::from(first) < i128::from(count) - 1 {
        return Err(corrupt(format!("{count} points cannot lie between {first} and {last}")));
    }
    Ok((h, kind, r.0))
}

/// Reads the header of a block without decoding its points.
pub fn header(bytes: &[u8]) -> Result<BlockHeader, BlockError> {
    split(bytes).map(|(h, _, _)| h)
}

/// Decodes a block, checking the points against the header: the count, first and last time,
/// min/max/sum, and strictly increasing timestamps. A corrupt block is an error, and nothing
/// this function allocates exceeds [`MAX_BLOCK_POINTS`] points. (Pco validates its own input;
/// its metadata buffers have fixed caps of its own, independent of this module.)
pub fn decode(bytes: &[u8]) -> Result<Vec<(i64, f64)>, BlockError> {
    let (h, kind, body) = split(bytes)?;
    let n = h.count as usize;
    let points: Vec<(i64, f64)> = if kind == KIND_RAW {
        if body.len() != n * RAW_POINT_LEN {
            return Err(corrupt(format!("{} bytes for {n} raw points", body.len())));
        }
        let mut r = Reader(body);
        (0..n)
            .map(|_| Ok((i64::from_be_bytes(r.array("point")?), r.f64("point")?)))
            .collect::<Result<_, BlockError>>()?
    } else {
        let mut r = Reader(body);
        let ts_len = u32::from_be_bytes(r.array("timestamps' length")?) as usize;
        let ts_bytes = r.bytes(ts_len, "timestamps")?;
        let values_len = u32::from_be_bytes(r.array("values' length")?) as usize;
        let values_bytes = r.bytes(values_len, "values")?;
        if !r.0.is_empty() {
            return Err(corrupt(format!("{} bytes after the values", r.0.len())));
        }
        // The buffers are sized by the checked count, never by what the pco files claim.
        let mut ts = vec![0i64; n];
        let mut values = vec![0f64; n];
        unpco(ts_bytes, &mut ts, "timestamps")?;
        unpco(values_bytes, &mut values, "values")?;
        ts.into_iter().zip(values).collect()
    };
    for (i, pair) in points.windows(2).enumerate() {
        if pair[1].0 <= pair[0].0 {
            return Err(corrupt(format!("timestamp {} does not follow {} (point {})", pair[1].0, pair[0].0, i + 1)));
        }
    }
    if !BlockHeader::of(&points).is_some_and(|again| again.agrees(&h)) {
        return Err(corrupt("the points do not match the header"));
    }
    Ok(points)
}

/// Decompresses one pco file into `dst`, which it must fill exactly.
fn unpco<T: pco::data_types::Number>(src: &[u8], dst: &mut [T], what: &str) -> Result<(), BlockError> {
    let progress = simple_decompress_into(src, dst).map_err(|e| corrupt(format!("{what}: {e}")))?;
    // `finished` means the file ended there; otherwise it holds more numbers than `dst`.
    if progress.n_processed != dst.len() || !progress.finished {
        return Err(corrupt(format!("{what}: the count does not match the header")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    const T0: i64 = 1_700_000_000_000_000_000;
    const STEP: i64 = 10_000_000_000;

    /// splitmix64, a deterministic generator for the fixed series.
    struct Mix(u64);

    impl Mix {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let z = (self.0 ^ (self.0 >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
    }

    /// A 2-decimal gauge around 2000.00 (a random walk in cents) every 10 s.
    fn gauge(n: usize, seed: u64) -> Vec<(i64, f64)> {
        let (mut rng, mut cents) = (Mix(seed), 200_000i64);
        let mut walk = || {
            cents += (rng.next() % 21) as i64 - 10;
            cents as f64 / 100.0
        };
        (0..n as i64).map(|i| (T0 + i * STEP, walk())).collect()
    }

    /// A CPU-like percentage in [0, 100) at full f64 precision every 10 s.
    fn cpu(n: usize, seed: u64) -> Vec<(i64, f64)> {
        let mut rng = Mix(seed);
        (0..n as i64).map(|i| (T0 + i * STEP, (rng.next() >> 11) as f64 / (1u64 << 53) as f64 * 100.0)).collect()
    }

    fn same_bits(a: &[(i64, f64)], b: &[(i64, f64)]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.0 == y.0 && x.1.to_bits() == y.1.to_bits())
    }

    /// What `decode` promises of the points it returns: they fit the block's header.
    fn fits_header(bytes: &[u8], points: &[(i64, f64)]) -> bool {
        header(bytes).is_ok_and(|h| {
            points.len() == h.count as usize
                && points.first().map(|p| p.0) == Some(h.first)
                && points.last().map(|p| p.0) == Some(h.last)
                && points.windows(2).all(|w| w[0].0 < w[1].0)
        })
    }

    /// NaN (and NaN payloads, through random bits), ±inf, ±0, subnormals, random bits and, most
    /// often, 2-decimal numbers, so that most series still compress and go through pco.
    fn value() -> impl Strategy<Value = f64> {
        prop_oneof![
            1 => prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(f64::NEG_INFINITY), Just(-0.0), Just(0.0)],
            1 => (1u64..1 << 52).prop_map(f64::from_bits),
            1 => any::<u64>().prop_map(f64::from_bits),
            12 => (-1_000_000i64..1_000_000).prop_map(|c| c as f64 / 100.0),
        ]
    }

    /// Up to `max` points from a random start (half of them negative): most series step by
    /// 1 ns, 10 s or up to 3 days; some by up to 2^61 ns, and those end early where the next
    /// step would overflow i64.
    fn series(max: usize) -> impl Strategy<Value = Vec<(i64, f64)>> {
        let narrow = prop_oneof![Just(1i64), Just(STEP), 1i64..1 << 48];
        let wide = prop_oneof![Just(1i64), 1i64..i64::MAX / 4];
        let steps = prop_oneof![3 => vec((narrow, value()), 1..max), 1 => vec((wide, value()), 1..max)];
        (any::<i64>(), steps).prop_map(|(mut ts, steps)| {
            let mut out = vec![(ts, steps[0].1)];
            for &(d, v) in &steps[1..] {
                let Some(next) = ts.checked_add(d) else { break };
                ts = next;
                out.push((ts, v));
            }
            out
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn round_trips_bit_exactly(points in series(2000)) {
            let bytes = encode(&points).unwrap();
            prop_assert!(same_bits(&decode(&bytes).unwrap(), &points));
            // The header is the aggregation's fold over the points, bit for bit.
            let (h, again) = (header(&bytes).unwrap(), BlockHeader::of(&points).unwrap());
            prop_assert_eq!((h.count as usize, h.first, h.last), (points.len(), points[0].0, points[points.len() - 1].0));
            prop_assert_eq!([h.min, h.max, h.sum].map(f64::to_bits), [again.min, again.max, again.sum].map(f64::to_bits));
        }

        #[test]
        fn decode_survives_random_bytes(mut bytes in vec(any::<u8>(), 0..400), kind in 0u8..2, model in series(40)) {
            prop_assert!(decode(&bytes).map_or(true, |p| fits_header(&bytes, &p)));
            // The same behind a valid header, so that the body gets parsed.
            bytes.splice(0..0, encode(&model).unwrap()[..HEADER_LEN].iter().copied());
            bytes[1] = kind;
            prop_assert!(decode(&bytes).map_or(true, |p| fits_header(&bytes, &p)));
        }

        #[test]
        fn decode_survives_truncation_and_corruption(points in series(300), mask in 1u8..=255) {
            let bytes = encode(&points).unwrap();
            for cut in 0..bytes.len() {
                prop_assert!(decode(&bytes[..cut]).is_err());
            }
            let mut bad = bytes.clone();
            for i in 0..bad.len() {
                bad[i] ^= mask;
                prop_assert!(decode(&bad).map_or(true, |p| fits_header(&bad, &p)));
                bad[i] = bytes[i];
            }
        }
    }

    #[test]
    fn encode_refuses_bad_input() {
        assert_eq!(encode(&[]), Err(BlockError::Empty));
        assert_eq!(encode(&[(5, 1.0), (4, 2.0)]), Err(BlockError::NotIncreasing { index: 1, prev: 5, ts: 4 }));
        let dup = [(1, 1.0), (2, 1.0), (2, 2.0)];
        assert_eq!(encode(&dup), Err(BlockError::NotIncreasing { index: 2, prev: 2, ts: 2 }));
        let many: Vec<(i64, f64)> = (0..=MAX_BLOCK_POINTS as i64).map(|i| (i, 0.0)).collect();
        assert_eq!(encode(&many), Err(BlockError::TooManyPoints(MAX_BLOCK_POINTS + 1)));
        assert!(encode(&many[..MAX_BLOCK_POINTS]).is_ok());
        assert_eq!(header(&[1]).unwrap_err().to_string(), "corrupt time-series block: truncated header");
    }

    #[test]
    fn special_values_go_through_pco() {
        let mut points = gauge(200, 3);
        let specials = [f64::NAN, -f64::NAN, f64::from_bits(0x7ff0_0000_dead_beef), f64::INFINITY, f64::NEG_INFINITY];
        for (i, v) in specials.into_iter().chain([-0.0, 0.0, f64::from_bits(1), f64::MIN_POSITIVE / 3.0]).enumerate() {
            points[i * 20 + 1].1 = v;
        }
        let bytes = encode(&points).unwrap();
        assert_eq!(bytes[1], KIND_PCO);
        assert!(same_bits(&decode(&bytes).unwrap(), &points));
        let h = header(&bytes).unwrap();
        assert!(h.sum.is_nan() && h.min == f64::NEG_INFINITY && h.max == f64::INFINITY);
    }

    #[test]
    fn raw_threshold_is_where_pco_pays() {
        for pick in [gauge, cpu] {
            // Just below the threshold pco would not be smaller; at 16 points it is.
            assert_eq!(pco_body(&pick(RAW_BELOW - 1, 4)), Ok(None));
            assert_eq!(encode(&pick(RAW_BELOW - 1, 4)).unwrap()[1], KIND_RAW);
            assert_eq!(encode(&pick(16, 4)).unwrap()[1], KIND_PCO);
        }
        // Past the threshold, incompressible points (random times and bits) still stay raw.
        let mut rng = Mix(5);
        let noise: Vec<_> = (0..12).map(|i| (i << 59 | (rng.next() >> 5) as i64, f64::from_bits(rng.next()))).collect();
        assert_eq!(encode(&noise).unwrap()[1], KIND_RAW);
    }

    #[test]
    fn bytes_per_point() {
        for (name, points, bound) in [("2-decimal gauge", gauge(10_000, 6), 1.0), ("CPU", cpu(10_000, 7), 7.5)] {
            let start = std::time::Instant::now();
            let bytes = encode(&points).unwrap();
            let encoded = start.elapsed();
            assert!(same_bits(&decode(&bytes).unwrap(), &points));
            let decoded = start.elapsed() - encoded;
            let per_point = bytes.len() as f64 / points.len() as f64;
            eprintln!("{name}, 10 s interval: {per_point:.3} bytes/point; encode {encoded:?}, decode {decoded:?}");
            assert!(per_point < bound, "{name}: {per_point} bytes/point");
        }
    }
}

#[cfg(test)]
mod extremes {
    use super::*;

    #[test]
    fn timestamps_across_the_whole_i64_range_round_trip() {
        // the points API takes times from 1678 to 2262: deltas beyond i64 between them
        let mut points: Vec<(i64, f64)> = (0..12).map(|i| (i64::MIN + 1 + i, i as f64)).collect();
        points.extend((0..12).map(|i| (i64::MAX - 12 + i, -(i as f64))));
        let bytes = encode(&points).unwrap();
        assert_eq!(decode(&bytes).unwrap(), points);
        let h = header(&bytes).unwrap();
        assert_eq!((h.first, h.last, h.count), (i64::MIN + 1, i64::MAX - 1, 24));
    }
}
