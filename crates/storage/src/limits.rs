//! What a backend can hold: its largest key, value and commit. A write that passes one is refused
//! before anything of it is written ([`StorageError::TooLarge`](super::StorageError)), and the
//! layers above answer it as a clear problem (`key_too_large`, `value_too_large`,
//! `commit_too_large`), never as a failure of the store.

use super::Space;
use super::range::KeyRange;

/// The sizes a backend takes, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// the longest key
    pub max_key: usize,
    /// the longest value
    pub max_value: usize,
    /// the most key and value bytes one write may commit (`None`: bounded only by memory, which
    /// the request limits bound)
    pub max_commit: Option<usize>,
}

impl Limits {
    /// Why a key (and its value, for a put) cannot be written, if it cannot.
    pub fn check(&self, space: Space, key: &[u8], value: Option<&[u8]>) -> Option<TooLarge> {
        if key.len() > self.max_key {
            return Some(TooLarge { what: Limit::Key, space, len: key.len(), max: self.max_key });
        }
        match value {
            Some(v) if v.len() > self.max_value => {
                Some(TooLarge { what: Limit::Value, space, len: v.len(), max: self.max_value })
            }
            _ => None,
        }
    }
}

/// Which limit a write passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// a key
    Key,
    /// a value
    Value,
    /// the bytes of one write
    Commit,
}

/// A write past a limit: what, in which key family, how long, and the most the backend takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge {
    /// the limit passed
    pub what: Limit,
    /// the key family (for a commit: the first family its write staged)
    pub space: Space,
    /// the bytes it has
    pub len: usize,
    /// the most the backend takes
    pub max: usize,
}

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (len, max) = (self.len, self.max);
        match self.what {
            Limit::Key => write!(
                f,
                "a key of the {} family would be {len} bytes, more than the storage backend's {max}: a value it is made of (an id, an indexed field, a token, a tag) is too long",
                self.space.name()
            ),
            Limit::Value => write!(
                f,
                "a value of the {} family would be {len} bytes, more than the storage backend's {max}",
                self.space.name()
            ),
            Limit::Commit => {
                write!(f, "the write would commit {len} bytes, more than the storage backend's {max}: split it")
            }
        }
    }
}

impl Limits {
    /// Whether a key of this length can be stored at all: a read of a longer one finds nothing
    /// without asking the backend (fjall panics on a key past its limit, even in a read).
    pub(super) fn readable(&self, key: &[u8]) -> bool {
        key.len() <= self.max_key
    }

    /// `range` as the backend takes it, holding the same stored keys: a bound longer than the
    /// longest key is cut to that length `T` — a lower bound becomes "after `T`", an upper bound
    /// "up to `T`" (a stored key is at most as long as `T`, so it is past the long bound exactly
    /// when it is past `T`, and `T` itself is below it) — and a prefix longer than any key holds
    /// nothing (`None`).
    pub(super) fn clamp(&self, range: KeyRange) -> Option<KeyRange> {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let max = self.max_key;
        match range {
            KeyRange::Prefix(p) => (p.len() <= max).then_some(KeyRange::Prefix(p)),
            KeyRange::Between(lo, hi) => {
                let lo = match lo {
                    Included(k) | Excluded(k) if k.len() > max => Excluded(k[..max].to_vec()),
                    other => other,
                };
                let hi = match hi {
                    Included(k) | Excluded(k) if k.len() > max => Included(k[..max].to_vec()),
                    other => other,
                };
                let empty = match (&lo, &hi) {
                    (Included(a), Included(b)) => a > b,
                    (Included(a) | Excluded(a), Included(b) | Excluded(b)) => a >= b,
                    (_, Unbounded) | (Unbounded, _) => false,
                };
                (!empty).then_some(KeyRange::Between(lo, hi))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{KeyRange, Limits};
    use proptest::prelude::*;
    use std::ops::Bound;

    fn within(range: &KeyRange, key: &[u8]) -> bool {
        match range {
            KeyRange::Prefix(p) => key.starts_with(p),
            KeyRange::Between(lo, hi) => {
                let above = match lo {
                    Bound::Included(b) => key >= b.as_slice(),
                    Bound::Excluded(b) => key > b.as_slice(),
                    Bound::Unbounded => true,
                };
                let below = match hi {
                    Bound::Included(b) => key <= b.as_slice(),
                    Bound::Excluded(b) => key < b.as_slice(),
                    Bound::Unbounded => true,
                };
                above && below
            }
        }
    }

    fn bound() -> impl Strategy<Value = Bound<Vec<u8>>> {
        let key = proptest::collection::vec(0u8..4, 0..7);
        prop_oneof![key.clone().prop_map(Bound::Included), key.prop_map(Bound::Excluded), Just(Bound::Unbounded)]
    }

    proptest! {
        /// A clamped range holds exactly the keys of at most `max_key` bytes the range holds
        /// (small alphabets and lengths, so bounds and keys share prefixes often).
        #[test]
        fn a_clamped_range_holds_the_same_storable_keys(
            lo in bound(),
            hi in bound(),
            prefix in proptest::collection::vec(0u8..4, 0..7),
            keys in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..=4), 0..40),
        ) {
            let limits = Limits { max_key: 4, max_value: 8, max_commit: None };
            for range in [KeyRange::Between(lo, hi), KeyRange::Prefix(prefix)] {
                let clamped = limits.clamp(range.clone());
                for key in &keys {
                    let want = within(&range, key);
                    let got = clamped.as_ref().is_some_and(|c| within(c, key));
                    prop_assert_eq!(got, want, "{:?} → {:?}, key {:?}", range, clamped, key);
                }
                if let Some(KeyRange::Between(lo, hi)) = &clamped {
                    for b in [lo, hi] {
                        if let Bound::Included(k) | Bound::Excluded(k) = b {
                            prop_assert!(k.len() <= 4);
                        }
                    }
                }
            }
        }
    }
}
