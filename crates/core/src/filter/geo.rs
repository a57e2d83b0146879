//! Points, distances and the geohash cells that cover a circle or a box.

use crate::{Result, ServiceError};
use mosaic_entity::ValueRef;

/// Geohash length stored in `sidx:` keys (about 3.7 cm x 1.9 cm).
pub const STORED_PRECISION: usize = 12;
/// Most cells a query scans.
const MAX_CELLS: usize = 64;
/// Mean Earth radius (IUGG), meters.
const EARTH_RADIUS_M: f64 = 6_371_008.8;

/// A point on Earth.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// degrees, -90..=90
    pub lat: f64,
    /// degrees, -180..=180
    pub lon: f64,
}

impl Point {
    /// A point, if the coordinates are in range.
    pub fn new(lat: f64, lon: f64) -> Option<Point> {
        ((-90.0..=90.0).contains(&lat) && (-180.0..=180.0).contains(&lon)).then_some(Point { lat, lon })
    }

    /// A point from a document value: `{"lat": .., "lon": ..}` or `[lon, lat]` (GeoJSON order).
    pub fn from_value(v: &ValueRef<'_>, dict: &mosaic_entity::FieldDict) -> Result<Option<Point>> {
        let num = |v: Option<ValueRef<'_>>| match v {
            Some(ValueRef::Int(i)) => Some(i as f64),
            Some(ValueRef::UInt(u)) => Some(u as f64),
            Some(ValueRef::Float(f)) => Some(f),
            _ => None,
        };
        Ok(match v {
            ValueRef::Object(o) => num(o.get(dict, "lat")?).zip(num(o.get(dict, "lon")?)),
            ValueRef::Array(a) if a.len() == 2 => num(a.get(1)?).zip(num(a.get(0)?)),
            ValueRef::Vector(vec) if vec.len() == 2 => {
                let mut it = vec.iter();
                it.next().zip(it.next()).map(|(lon, lat)| (f64::from(lat), f64::from(lon)))
            }
            _ => None,
        }
        .and_then(|(lat, lon)| Point::new(lat, lon)))
    }

    /// A point from query JSON: `{"lat": .., "lon": ..}`.
    pub fn from_json(v: &serde_json::Value) -> Option<Point> {
        Point::new(v.get("lat")?.as_f64()?, v.get("lon")?.as_f64()?)
    }

    /// The stored geohash of the point.
    pub fn geohash(self) -> Result<String> {
        geohash::encode(geohash::Coord { x: self.lon, y: self.lat }, STORED_PRECISION)
            .map_err(|e| ServiceError::Internal(format!("geohash: {e}")))
    }

    /// Great-circle distance in meters (haversine).
    pub fn distance_m(self, other: Point) -> f64 {
        let (p1, p2) = (self.lat.to_radians(), other.lat.to_radians());
        let dp = p2 - p1;
        let dl = (other.lon - self.lon).to_radians();
        let a = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
        2.0 * EARTH_RADIUS_M * a.sqrt().min(1.0).asin()
    }
}

/// A latitude/longitude box (may cross the antimeridian when `min_lon > max_lon`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeoBox {
    /// south edge
    pub min_lat: f64,
    /// west edge
    pub min_lon: f64,
    /// north edge
    pub max_lat: f64,
    /// east edge
    pub max_lon: f64,
}

impl GeoBox {
    /// The box around a circle.
    pub fn around(center: Point, meters: f64) -> GeoBox {
        let dlat = (meters / EARTH_RADIUS_M).to_degrees();
        let (min_lat, max_lat) = ((center.lat - dlat).max(-90.0), (center.lat + dlat).min(90.0));
        let cos = min_lat.to_radians().cos().min(max_lat.to_radians().cos());
        if max_lat >= 90.0 || min_lat <= -90.0 || cos < 1e-9 || dlat / cos >= 180.0 {
            return GeoBox { min_lat, min_lon: -180.0, max_lat, max_lon: 180.0 };
        }
        let dlon = dlat / cos;
        let wrap = |l: f64| {
            if l < -180.0 {
                l + 360.0
            } else if l > 180.0 {
                l - 360.0
            } else {
                l
            }
        };
        GeoBox { min_lat, min_lon: wrap(center.lon - dlon), max_lat, max_lon: wrap(center.lon + dlon) }
    }

    /// True when the point lies in the box.
    pub fn contains(&self, p: Point) -> bool {
        let lon_ok = if self.min_lon <= self.max_lon {
            (self.min_lon..=self.max_lon).contains(&p.lon)
        } else {
            p.lon >= self.min_lon || p.lon <= self.max_lon
        };
        (self.min_lat..=self.max_lat).contains(&p.lat) && lon_ok
    }

    fn width(&self) -> f64 {
        if self.min_lon <= self.max_lon { self.max_lon - self.min_lon } else { 360.0 - self.min_lon + self.max_lon }
    }

    /// Geohash cells (prefixes) that together cover the box: the finest precision that needs at
    /// most 64 cells.
    pub fn cells(&self) -> Vec<String> {
        let (h, w) = (self.max_lat - self.min_lat, self.width());
        let precision = (1..=STORED_PRECISION)
            .rev()
            .find(|&p| {
                let (ch, cw) = cell_size(p);
                ((h / ch).floor() + 2.0) * ((w / cw).floor() + 2.0) <= MAX_CELLS as f64
            })
            .unwrap_or(1);
        let (ch, cw) = cell_size(precision);
        let mut cells = std::collections::BTreeSet::new();
        let mut lat = self.min_lat;
        loop {
            let mut dx: f64 = 0.0;
            loop {
                let mut lon = self.min_lon + dx.min(w);
                if lon > 180.0 {
                    lon -= 360.0;
                }
                if let Ok(cell) = geohash::encode(geohash::Coord { x: lon, y: lat.clamp(-90.0, 90.0) }, precision) {
                    cells.insert(cell);
                }
                if dx >= w {
                    break;
                }
                dx += cw;
            }
            if lat >= self.max_lat {
                break;
            }
            lat = (lat + ch).min(self.max_lat);
        }
        cells.into_iter().collect()
    }
}

/// Height and width in degrees of a geohash cell of `precision` characters.
fn cell_size(precision: usize) -> (f64, f64) {
    let bits = 5 * precision as i32;
    let (lat_bits, lon_bits) = (bits / 2, bits - bits / 2);
    (180.0 / 2f64.powi(lat_bits), 360.0 / 2f64.powi(lon_bits))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        let oslo = Point::new(59.9139, 10.7522).unwrap();
        let bergen = Point::new(60.3913, 5.3221).unwrap();
        let d = oslo.distance_m(bergen);
        assert!((d - 305_000.0).abs() < 5_000.0, "{d}");
        assert_eq!(oslo.distance_m(oslo), 0.0);
    }

    #[test]
    fn covering_cells_hold_every_point_of_the_box() {
        let cases = [
            (Point::new(59.9, 10.7).unwrap(), 1_000.0),
            (Point::new(0.0, 179.99).unwrap(), 50_000.0),
            (Point::new(-89.9, 0.0).unwrap(), 30_000.0),
            (Point::new(45.0, -120.0).unwrap(), 2_000_000.0),
        ];
        for (center, meters) in cases {
            let b = GeoBox::around(center, meters);
            let cells = b.cells();
            assert!(!cells.is_empty() && cells.len() <= 64 * 2, "{}", cells.len());
            // sample points of the box: each one's full geohash starts with some cell
            for i in 0..=20 {
                for j in 0..=20 {
                    let lat = b.min_lat + (b.max_lat - b.min_lat) * i as f64 / 20.0;
                    let mut lon = b.min_lon + b.width() * j as f64 / 20.0;
                    if lon > 180.0 {
                        lon -= 360.0;
                    }
                    let p = Point::new(lat, lon).unwrap();
                    let h = p.geohash().unwrap();
                    assert!(cells.iter().any(|c| h.starts_with(c.as_str())), "{p:?} not covered by {cells:?}");
                }
            }
            // and the circle lies within the box
            for k in 0..36 {
                let a = (k as f64 * 10.0).to_radians();
                let dlat = (meters * 0.999 / EARTH_RADIUS_M).to_degrees() * a.cos();
                let lat = (center.lat + dlat).clamp(-90.0, 90.0);
                let dlon = (meters * 0.999 / EARTH_RADIUS_M).to_degrees() * a.sin() / lat.to_radians().cos().max(1e-9);
                let mut lon = center.lon + dlon;
                if lon > 180.0 {
                    lon -= 360.0;
                }
                if lon < -180.0 {
                    lon += 360.0;
                }
                if let Some(p) = Point::new(lat, lon)
                    && center.distance_m(p) <= meters
                {
                    assert!(b.contains(p), "{p:?} outside {b:?}");
                }
            }
        }
    }
}
