//! `dafka-tower`: a standalone Dafka tower. Everything but `main` lives in the
//! library (`_native::cli`), shared with the Python `dafka tower`.

fn main() {
    std::process::exit(_native::cli::binary_main(
        "dafka-tower",
        _native::cli::tower_main,
    ));
}
