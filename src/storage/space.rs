//! The keyspaces, one per key family (see `keys`), and how each is created.

use fjall::KeyspaceCreateOptions;

/// The keyspaces, one per key family (see `keys`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Space {
    /// documents
    Entity,
    /// equality and unique indexes
    Idx,
    /// range indexes
    Ridx,
    /// spatial indexes
    Sidx,
    /// full-text postings
    Ftidx,
    /// full-text document lengths and statistics
    Ftstat,
    /// graph adjacency
    Graph,
    /// vector indexes
    Vec,
    /// time-series points
    Ts,
    /// expiry entries
    Ttlidx,
    /// maintained views
    View,
    /// change events
    Changefeed,
    /// the catalog
    Meta,
}

impl Space {
    /// How a keyspace is created (fjall keeps these with it: a data directory keeps the options
    /// it was created with).
    pub(super) fn options(self, memtable_bytes: u64) -> KeyspaceCreateOptions {
        let options = KeyspaceCreateOptions::default().max_memtable_size(memtable_bytes);
        match self {
            // Documents are read by key far more than scanned (GET, PUT's old version, a query's
            // entities): a hash index in each data block finds a key without the block's binary
            // search.
            Space::Entity => options.data_block_hash_ratio_policy(fjall::config::HashRatioPolicy::all(0.75)),
            // Posting blocks repeat their ids' shapes and field numbers block after block: lz4 on
            // every level, not only the deepest (fjall's default leaves levels 0-1 plain, where an
            // index of some 100k documents lives).
            Space::Ftidx | Space::Ftstat => options
                .data_block_compression_policy(fjall::config::CompressionPolicy::all(fjall::CompressionType::Lz4)),
            _ => options,
        }
    }

    /// Every keyspace, in `Space as usize` order.
    pub const ALL: [Space; 13] = [
        Space::Entity,
        Space::Idx,
        Space::Ridx,
        Space::Sidx,
        Space::Ftidx,
        Space::Ftstat,
        Space::Graph,
        Space::Vec,
        Space::Ts,
        Space::Ttlidx,
        Space::View,
        Space::Changefeed,
        Space::Meta,
    ];

    /// The keyspace's name on disk (and the family name of its display form).
    pub fn name(self) -> &'static str {
        match self {
            Space::Entity => "entity",
            Space::Idx => "idx",
            Space::Ridx => "ridx",
            Space::Sidx => "sidx",
            Space::Ftidx => "ftidx",
            Space::Ftstat => "ftstat",
            Space::Graph => "graph",
            Space::Vec => "vec",
            Space::Ts => "ts",
            Space::Ttlidx => "ttlidx",
            Space::View => "view",
            Space::Changefeed => "changefeed",
            Space::Meta => "meta",
        }
    }

    /// The keyspace of that name.
    pub fn from_name(name: &str) -> Option<Space> {
        Space::ALL.into_iter().find(|s| s.name() == name)
    }
}
