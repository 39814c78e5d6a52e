pub fn configure() {
    println!("cargo:rerun-if-changed=build/main.rs");
    println!("cargo:rerun-if-env-changed=PROFILE");

    // Note that by default `libzmq` builds without `libsodium` by instead
    // relying on `tweetnacl`. However since this `tweetnacl` [has never been
    // audited nor is ready for production](https://github.com/zeromq/libzmq/issues/3006),
    // we link against `libsodium` to enable `ZMQ_CURVE`.
    // Vendored change (dafka): link the libsodium that `libsodium-sys-stable`
    // built, so that libzmq has CURVE (`zmq_has("curve")`).
    let lib = std::env::var("DEP_SODIUM_LIB").expect("libsodium-sys-stable sets DEP_SODIUM_LIB");
    let include =
        std::env::var("DEP_SODIUM_INCLUDE").expect("libsodium-sys-stable sets DEP_SODIUM_INCLUDE");
    zeromq_src::Build::new()
        .with_libsodium(Some(zeromq_src::LibLocation::new(lib, include)))
        .build();
}

fn main() {
    configure()
}
