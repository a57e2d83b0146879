//! The keyspaces, one per key family (see `keys`), and how each is created.

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
    /// document history: the versions a write replaced, of the tables that keep them
    Hist,
}

impl Space {
    /// Every keyspace, in `Space as usize` order.
    pub const ALL: [Space; 14] = [
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
        Space::Hist,
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
            Space::Hist => "hist",
        }
    }

    /// The keyspace of that name.
    pub fn from_name(name: &str) -> Option<Space> {
        Space::ALL.into_iter().find(|s| s.name() == name)
    }
}
