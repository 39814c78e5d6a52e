//! `dafka-store`: a standalone Dafka store node. Everything but `main` lives
//! in the library (`_native::cli`), shared with the Python `dafka store`.

fn main() {
    std::process::exit(_native::cli::binary_main(
        "dafka-store",
        _native::cli::store_main,
    ));
}
