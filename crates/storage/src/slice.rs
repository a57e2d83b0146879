//! Bytes read from the store: fjall's reference-counted byte view, which every backend can
//! make from bytes of its own.

/// Bytes read from the store (a cheap, reference-counted slice).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slice(pub(super) fjall::Slice);

impl std::ops::Deref for Slice {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl From<Vec<u8>> for Slice {
    fn from(bytes: Vec<u8>) -> Self {
        Slice(bytes.into())
    }
}

impl From<&[u8]> for Slice {
    fn from(bytes: &[u8]) -> Self {
        Slice(bytes.into())
    }
}

impl AsRef<[u8]> for Slice {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Slice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", &*self.0)
    }
}
