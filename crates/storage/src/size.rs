//! How much a store holds (what a database's quota counts).

impl super::Store {
    /// The bytes the store holds (what a database's quota counts): every keyspace's table files
    /// and memtables (embedded), its tables with their TOAST and indexes (PostgreSQL). Reads
    /// in-memory figures (one query on PostgreSQL): not for every request.
    pub fn stored_bytes(&self) -> super::Result<u64> {
        self.inner.engine.stored_bytes()
    }
}
