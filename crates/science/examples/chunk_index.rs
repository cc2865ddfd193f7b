//! Prints the chunk index (JSON) of a netCDF file: `cargo run -p granary-science
//! --example chunk_index -- FILE.nc`.
fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: chunk_index FILE.nc");
        std::process::exit(2);
    };
    let limits = granary_science::netcdf::Limits::default();
    match granary_science::netcdf::chunk_index(std::path::Path::new(&path), &limits) {
        Ok(ix) => println!("{}", serde_json::to_string_pretty(&ix).unwrap_or_default()),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
