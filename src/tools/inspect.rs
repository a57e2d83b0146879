//! `mosaicdb inspect <data-dir> [prefix]`: every key in display form with its decoded value.

use crate::catalog::{Catalog, CatalogError};
use crate::keys::{self, sidx};
use crate::storage::{KeyRange, Space, StorageConfig, Store};
use std::io::Write;

/// Prints the keys of the store at `data_dir` whose display form starts with `prefix` (all keys
/// when it is empty), one per line: `display-key  value`.
pub fn inspect(storage: StorageConfig, prefix: &str, out: &mut impl Write) -> Result<u64, CatalogError> {
    let store = Store::open(storage, &crate::service::changefeed::Events)?;
    let catalog = Catalog::load(&store)?;
    let view = store.snapshot();
    let family = prefix.split(':').next().unwrap_or_default();
    let spaces: Vec<Space> = match family {
        "" => Space::ALL.to_vec(),
        "ftdlen" | "ftterm" | "ftstat" => vec![Space::Ftstat],
        name => Space::from_name(name).into_iter().collect(),
    };
    let mut printed = 0;
    for space in spaces {
        for item in view.scan(space, KeyRange::Prefix(Vec::new()), false) {
            let (key, value) = item?;
            let shown = keys::display(space.name(), &key);
            if !shown.starts_with(prefix) {
                continue;
            }
            let value = render_value(&catalog, space, &value);
            writeln!(out, "{shown}  {value}").map_err(|e| crate::storage::StorageError::Engine(e.to_string()))?;
            printed += 1;
        }
    }
    drop(view);
    store.close()?;
    Ok(printed)
}

fn render_value(catalog: &Catalog, space: Space, value: &[u8]) -> String {
    match space {
        Space::Entity => catalog.decode(value).map_or_else(|e| format!("<undecodable: {e}>"), |v| v.to_string()),
        Space::Sidx => {
            sidx::decode_point(value).map_or_else(|e| format!("<{e}>"), |(lat, lon)| format!("lat={lat} lon={lon}"))
        }
        Space::Graph => keys::AdjValue::decode(value).map_or_else(
            |e| format!("<{e}>"),
            |v| match v.weight {
                Some(w) => format!("{} weight={w}", v.other),
                None => v.other.into_owned(),
            },
        ),
        _ if value.is_empty() => String::new(),
        _ => match std::str::from_utf8(value) {
            Ok(text) => text.to_owned(),
            Err(_) => format!("0x{}", value.iter().map(|b| format!("{b:02x}")).collect::<String>()),
        },
    }
}
