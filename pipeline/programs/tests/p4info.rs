//! Each program's checked-in P4Info is exactly what its schema generates (schemes that share a
//! program, like `p4te-nra`, share its file).

#[test]
fn checked_in_p4info_matches_the_schema() {
    for name in programs::names() {
        let program = programs::by_name(name).unwrap();
        let generated = pipeline::p4info::to_text(program.schema());
        let file = program.schema().name;
        let path = format!("{}/p4info/{file}.txt", env!("CARGO_MANIFEST_DIR"));
        if std::env::var_os("UPDATE_P4INFO").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            checked_in == generated,
            "{path} differs from the schema of {name}; regenerate with UPDATE_P4INFO=1 cargo test -p programs --test p4info"
        );
    }
}
