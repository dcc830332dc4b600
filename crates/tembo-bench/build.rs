//! Compiles the C peers (`c/*_peer.c`) and links their Debian libraries,
//! only with the `peers` feature: a build without it needs no C library.

fn main() {
    println!("cargo:rerun-if-changed=c");
    #[cfg(feature = "peers")]
    {
        cc::Build::new()
            .files(["c/peer_util.c", "c/lmdb_peer.c", "c/rocksdb_peer.c", "c/bdb_peer.c", "c/pmemobj_peer.c"])
            .include("c")
            .opt_level(2)
            .warnings(true)
            .compile("tembo_peers");
        for lib in ["lmdb", "rocksdb", "db", "pmemobj"] {
            println!("cargo:rustc-link-lib={lib}");
        }
    }
}
