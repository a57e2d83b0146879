//! The statements of the supported InfluxQL subset, as parsed.

/// One statement.
#[derive(Debug, Clone)]
pub enum Statement {
    /// `SELECT …`
    Select(Box<Select>),
    /// `SHOW DATABASES`
    ShowDatabases,
    /// `SHOW RETENTION POLICIES [ON db]`
    ShowRetentionPolicies { on: Option<String> },
    /// `SHOW MEASUREMENTS [WITH MEASUREMENT op x] [WHERE …] [LIMIT n] [OFFSET n]`
    ShowMeasurements { on: Option<String>, name: Option<NameFilter>, cond: Option<Cond>, page: Page },
    /// `SHOW TAG KEYS [FROM …] [WHERE …] [LIMIT n] [OFFSET n]`
    ShowTagKeys { from: Vec<Source>, cond: Option<Cond>, page: Page },
    /// `SHOW TAG VALUES [FROM …] WITH KEY op x [WHERE …] [LIMIT n] [OFFSET n]`
    ShowTagValues { from: Vec<Source>, key: NameFilter, cond: Option<Cond>, page: Page },
    /// `SHOW FIELD KEYS [FROM …] [LIMIT n] [OFFSET n]`
    ShowFieldKeys { from: Vec<Source>, page: Page },
    /// `SHOW SERIES [FROM …] [WHERE …] [LIMIT n] [OFFSET n]`
    ShowSeries { from: Vec<Source>, cond: Option<Cond>, page: Page },
}

impl Statement {
    /// The database an `ON db` clause names.
    pub fn on(&self) -> Option<&str> {
        match self {
            Statement::ShowRetentionPolicies { on } | Statement::ShowMeasurements { on, .. } => on.as_deref(),
            _ => None,
        }
    }
}

/// `LIMIT` and `OFFSET`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Page {
    pub limit: Option<usize>,
    pub offset: usize,
}

impl Page {
    /// The items of the page.
    pub fn of<T>(&self, items: impl IntoIterator<Item = T>) -> Vec<T> {
        items.into_iter().skip(self.offset).take(self.limit.unwrap_or(usize::MAX)).collect()
    }
}

/// A measurement named in `FROM`: by name, or every one a regular expression matches.
#[derive(Debug, Clone)]
pub enum Source {
    Name(String),
    Regex(regex::Regex),
}

/// How names (measurements, tag keys) are picked: `= x`, `!= x`, `=~ /re/`, `!~ /re/`, `IN (…)`.
#[derive(Debug, Clone)]
pub enum NameFilter {
    Eq(String),
    Ne(String),
    Re(regex::Regex),
    NotRe(regex::Regex),
    In(Vec<String>),
}

impl NameFilter {
    pub fn matches(&self, name: &str) -> bool {
        match self {
            NameFilter::Eq(v) => name == v,
            NameFilter::Ne(v) => name != v,
            NameFilter::Re(re) => re.is_match(name),
            NameFilter::NotRe(re) => !re.is_match(name),
            NameFilter::In(list) => list.iter().any(|v| v == name),
        }
    }
}

/// A `SELECT`.
#[derive(Debug, Clone)]
pub struct Select {
    pub fields: Vec<Field>,
    pub from: Vec<Source>,
    pub cond: Option<Cond>,
    /// `GROUP BY time(interval, offset)`, in nanoseconds
    pub interval: Option<(i64, i64)>,
    pub group_tags: GroupTags,
    pub fill: Fill,
    pub desc: bool,
    /// `LIMIT` and `OFFSET`: points (rows) per series
    pub rows: Page,
    /// `SLIMIT` and `SOFFSET`: series
    pub series: Page,
}

/// `GROUP BY` tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupTags {
    /// every tag key (`GROUP BY *`)
    All,
    /// these tag keys (none: no grouping by tags)
    Keys(Vec<String>),
}

/// What `fill()` puts in an empty interval of `GROUP BY time`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fill {
    Null,
    None,
    Previous,
    Linear,
    Value(f64),
}

/// One column of a `SELECT`.
#[derive(Debug, Clone)]
pub struct Field {
    pub expr: FieldExpr,
    pub alias: Option<String>,
}

/// A column's expression.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldExpr {
    /// `*`: every field (and, in a raw query, every tag)
    Wildcard,
    /// a field's raw values
    Field(String),
    /// an aggregate of a field (`None`: of every field, `agg(*)`)
    Call(Func, Option<String>),
}

/// The aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Func {
    Mean,
    Sum,
    Count,
    Min,
    Max,
    First,
    Last,
    Median,
    Spread,
    Stddev,
}

impl Func {
    pub const ALL: [Func; 10] = [
        Func::Mean,
        Func::Sum,
        Func::Count,
        Func::Min,
        Func::Max,
        Func::First,
        Func::Last,
        Func::Median,
        Func::Spread,
        Func::Stddev,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Func::Mean => "mean",
            Func::Sum => "sum",
            Func::Count => "count",
            Func::Min => "min",
            Func::Max => "max",
            Func::First => "first",
            Func::Last => "last",
            Func::Median => "median",
            Func::Spread => "spread",
            Func::Stddev => "stddev",
        }
    }

    /// Whether the aggregate picks one point (whose time a lone selector reports).
    pub fn is_selector(self) -> bool {
        matches!(self, Func::Min | Func::Max | Func::First | Func::Last)
    }
}

/// A `WHERE` condition.
#[derive(Debug, Clone)]
pub enum Cond {
    And(Box<Cond>, Box<Cond>),
    Or(Box<Cond>, Box<Cond>),
    Cmp(Operand, CmpOp, Operand),
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Re,
    NotRe,
}

/// A side of a comparison.
#[derive(Debug, Clone)]
pub enum Operand {
    /// a tag key, a field or `time`
    Ident(String),
    /// a string
    Str(String),
    /// a regular expression (unanchored, as InfluxDB matches)
    Regex(regex::Regex),
    /// a number as written
    Number(f64),
    /// a time in nanoseconds: `now()`, a duration literal (`1700000000000ms`), or arithmetic
    Time(i64),
}
