//! STAC items: the matching datasets built into items (assets, facets, times, bbox)
//! on the catalog's blocking thread, under the request's budget.

use super::*;

/// The matching items (datasets) and the page of them asked for.
///
/// Items are built, and the filter and bbox evaluated on them, on the catalog's
/// blocking thread, under the request's budget (checked between items): a filter
/// that matches few of many datasets costs at most the deadline, then 503.
pub(super) async fn items_of(
    node: &State,
    o: &str,
    s: &Search,
) -> Result<(usize, Vec<Value>), Response> {
    if let Some(c) = &s.collections {
        if !c.iter().any(|c| c == COLLECTION) {
            return Ok((0, vec![]));
        }
    }
    let filter: Option<std::sync::Arc<Expr>> = match &s.filter {
        Some(f) => Some(std::sync::Arc::new(cql2::compile(f).map_err(|e| {
            let mut r = fail(StatusCode::BAD_REQUEST, e.to_string());
            r.headers_mut()
                .insert("x-granary-limit", header::HeaderValue::from_static(e.limit));
            r
        })?)),
        None => None,
    };
    let mut q = Query {
        latest_only: true,
        dataset_latest: true,
        limit: MAX_SCAN,
        sort: granary_catalog::Sort::Name,
        ..Query::default()
    };
    q.filters.insert("project".into(), vec!["CMIP6".into()]);
    let pushed_whole = match &s.filter {
        Some(f) => pushdown(f, &mut q),
        None => true,
    };
    if let Some((a, b)) = &s.datetime {
        q.time_overlap = Some((a.clone(), b.clone()));
    }
    // The catalog's dataset records, their newest versions; the page's files are
    // then read for the assets. A filter the catalog cannot answer, or a bbox, is
    // evaluated on the items, every match built (at most MAX_SCAN datasets).
    let exact = pushed_whole && s.bbox.is_none();
    q.dataset_latest = false;
    let (offset, limit) = if exact {
        (s.offset, s.limit)
    } else {
        (0, MAX_LIMIT)
    };
    q.offset = offset;
    q.limit = limit;
    let mut dq = DatasetQuery {
        query: q,
        latest: Some(true),
        ids: s.ids.clone().unwrap_or_default(),
        files: true,
    };
    if s.ids.as_ref().is_some_and(Vec::is_empty) {
        return Ok((0, vec![]));
    }
    let host = o.to_string();
    let mut matched = Vec::new();
    let mut n = 0usize;
    loop {
        let dq2 = dq.clone();
        let host = host.clone();
        let filter = filter.clone();
        let bbox = s.bbox;
        let (offset, limit) = (s.offset, s.limit);
        let skip = n;
        let room = s.limit.saturating_sub(matched.len());
        let assets = if s.assets == 0 { MAX_ASSETS } else { s.assets };
        let (total, got, passed, items) = with_catalog_budget(node, move |c, budget| {
            let page = c.datasets(&dq2)?;
            budget.check()?;
            let keys: Vec<(String, u64)> = page
                .hits
                .iter()
                .flat_map(|d| {
                    d.files
                        .iter()
                        .take(assets)
                        .map(|f| (f.name.clone(), f.version))
                })
                .collect();
            let mut recs: BTreeMap<(String, u64), Record> = BTreeMap::new();
            for r in c.get_many(&keys)? {
                recs.insert((r.name.clone(), r.version), r);
            }
            let got = page.hits.len();
            let mut passed = 0usize;
            let mut items = Vec::new();
            for d in &page.hits {
                budget.check()?;
                let files: Vec<Record> = d
                    .files
                    .iter()
                    .filter_map(|f| recs.remove(&(f.name.clone(), f.version)))
                    .collect();
                if files.is_empty() {
                    continue;
                }
                let item = item_doc(&d.instance_id, &files, &host, Some(d));
                if let Some(b) = &bbox {
                    if !bbox_meets(&item["bbox"], b) {
                        continue;
                    }
                }
                if let Some(f) = &filter {
                    if !f.eval(&item) {
                        continue;
                    }
                }
                if exact {
                    items.push(item);
                } else {
                    let k = skip + passed;
                    if k >= offset && items.len() < room && k < offset + limit {
                        items.push(item);
                    }
                    passed += 1;
                }
            }
            Ok((page.total, got, passed, items))
        })
        .await?;
        if exact {
            return Ok((total as usize, items));
        }
        n += passed;
        matched.extend(items);
        dq.query.offset += got;
        if got == 0 || dq.query.offset as u64 >= total || dq.query.offset >= MAX_SCAN {
            return Ok((n, matched));
        }
    }
}

/// One item: a dataset (its files' records, in name order).
/// `whole`: the dataset's record, whose counts, size and time coverage cover
/// every file when `files` lists only the first ones.
pub(super) fn item_doc(
    inst: &str,
    files: &[Record],
    o: &str,
    whole: Option<&granary_catalog::Dataset>,
) -> Value {
    let first = &files[0];
    let mut props = Map::new();
    for (k, v) in &first.facets {
        props.insert(format!("cmip6:{k}"), json!(v));
    }
    if let Some(a) = first.facets.get("activity_id") {
        props
            .entry("cmip6:activity_drs")
            .or_insert_with(|| json!(a));
    }
    props
        .entry("cmip6:mip_era")
        .or_insert_with(|| json!(first.project));
    if let Some(u) = &first.further_info_url {
        props.insert("cmip6:further_info_url".into(), json!(u));
    }
    props.insert("cmip6:retracted".into(), json!(false));
    props.insert("latest".into(), json!(true));
    let version = inst.rsplit('.').next().unwrap_or_default();
    props.insert("version".into(), json!(version));
    let start = files
        .iter()
        .filter_map(|r| r.time_start.as_deref().and_then(rfc3339))
        .min();
    let end = files
        .iter()
        .filter_map(|r| r.time_end.as_deref().and_then(rfc3339))
        .max();
    props.insert("datetime".into(), Value::Null);
    props.insert("start_datetime".into(), json!(start));
    props.insert("end_datetime".into(), json!(end));
    let (count, size) = match whole {
        Some(d) => (d.number_of_files as usize, d.size),
        None => (files.len(), files.iter().map(|r| r.size).sum::<u64>()),
    };
    if let Some(d) = whole.filter(|d| d.number_of_files as usize > files.len()) {
        // Only the first files are listed: the times of the whole dataset.
        let t = |x: &Option<String>| x.as_deref().and_then(rfc3339);
        props.insert(
            "start_datetime".into(),
            json!(t(&d.time_start).or(start.clone())),
        );
        props.insert("end_datetime".into(), json!(t(&d.time_end).or(end.clone())));
        props.insert("granary:assets_listed".into(), json!(files.len()));
    }
    props.insert("file_count".into(), json!(count));
    props.insert("size".into(), json!(size));
    // Record bboxes are [lat_min, lat_max, lon_min, lon_max]; STAC's is
    // [west, south, east, north], longitudes into -180..180 when they fit.
    let mut bb: Option<[f64; 4]> = None;
    for r in files {
        if let Some([s, n, w, e]) = r.bbox {
            let b = bb.get_or_insert([w, s, e, n]);
            *b = [b[0].min(w), b[1].min(s), b[2].max(e), b[3].max(n)];
        }
    }
    let (bbox, geometry) = match bb {
        Some([mut w, s, mut e, n]) => {
            if w >= 180.0 && e <= 360.0 {
                w -= 360.0;
                e -= 360.0;
            } else if e > 180.0 {
                // Crosses the antimeridian (0..360 grids): the whole globe in longitude.
                w = -180.0;
                e = 180.0;
            }
            let poly = json!({"type": "Polygon", "coordinates": [[[w, s], [e, s], [e, n], [w, n], [w, s]]]});
            (json!([w, s, e, n]), poly)
        }
        None => (Value::Null, Value::Null),
    };
    let data = o.trim_end_matches("/stac");
    let mut assets = Map::new();
    for r in files {
        let mut a = Map::new();
        a.insert(
            "href".into(),
            json!(format!(
                "{data}{}&drs={}",
                crate::api::download_path(&r.name, r.version),
                drs_path(r)
            )),
        );
        a.insert("type".into(), json!("application/netcdf"));
        a.insert("title".into(), json!(r.title));
        a.insert("roles".into(), json!(["data"]));
        a.insert("file:size".into(), json!(r.size));
        if let Some(h) = &r.sha256 {
            a.insert("file:checksum".into(), json!(format!("1220{h}")));
        }
        if let Some(t) = &r.tracking_id {
            a.insert("cmip6:tracking_id".into(), json!(t));
        }
        assets.insert(r.title.clone(), Value::Object(a));
    }
    let mut item = json!({
        "type": "Feature",
        "stac_version": STAC_VERSION,
        "stac_extensions": [FILE_EXT],
        "id": inst,
        "collection": COLLECTION,
        "geometry": geometry,
        "properties": props,
        "links": [
            link("self", format!("{o}/collections/{COLLECTION}/items/{}", enc(inst)), "application/geo+json"),
            link("parent", format!("{o}/collections/{COLLECTION}"), "application/json"),
            link("collection", format!("{o}/collections/{COLLECTION}"), "application/json"),
            link("root", o.to_string(), "application/json"),
        ],
        "assets": assets,
    });
    if !bbox.is_null() {
        item["bbox"] = bbox;
    }
    item
}

/// The DRS path of a file, URL-encoded but for its slashes:
/// `CMIP6/CMIP/<institution>/…/<grid>/v20190308/<file name>` (the name's
/// directories, its first written as the project, then the DRS version).
pub(super) fn drs_path(r: &Record) -> String {
    let mut comps: Vec<&str> = r.name.split('/').filter(|c| !c.is_empty()).collect();
    let file = comps.pop().unwrap_or_default();
    if let Some(first) = comps.first_mut() {
        if !r.project.is_empty() && first.eq_ignore_ascii_case(&r.project) {
            *first = r.project.as_str();
        }
    }
    let version = r.facets.get("version").map(String::as_str);
    comps
        .into_iter()
        .chain(version)
        .chain([file])
        .map(|c| {
            // Name components are NDN URI text: decode their escapes first.
            let raw: Vec<u8> = percent_encoding::percent_decode_str(c).collect();
            enc(&String::from_utf8_lossy(&raw))
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// True when an item's bbox meets `[w, s, e, n]` (longitudes compared also a
/// turn east and west, for 0..360 boxes).
pub(super) fn bbox_meets(item: &Value, q: &[f64; 4]) -> bool {
    let Some(b) = item
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect::<Vec<_>>())
    else {
        return false;
    };
    if b.len() != 4 || b[1] > q[3] || b[3] < q[1] {
        return false;
    }
    [-360.0, 0.0, 360.0]
        .iter()
        .any(|k| b[0] <= q[2] + k && b[2] >= q[0] + k)
}
