//! How much a store holds (what a database's quota counts).

impl super::Store {
    /// The bytes the store holds: every keyspace's table files and memtables (what a database's
    /// quota counts). Reads in-memory figures (a query per keyspace on PostgreSQL): not for every
    /// request.
    pub fn stored_bytes(&self) -> u64 {
        let engine = &self.inner.engine;
        super::Space::ALL.iter().map(|s| engine.disk_space(*s)).sum::<u64>() + engine.write_buffer_bytes()
    }
}
