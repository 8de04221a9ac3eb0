use txoutbox::{EventRegistry, IntegrationEvent};

#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "cache.flushed")]
struct CacheFlushed;

#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize, txoutbox::IntegrationEvent)]
#[event(name = "user.renamed", version = 2)]
struct UserRenamed(u64, String);

fn main() {
    assert_eq!(CacheFlushed::NAME, "cache.flushed");
    assert_eq!(UserRenamed::NAME, "user.renamed");
    assert_eq!(UserRenamed::VERSION, 2);

    let registry = EventRegistry::from_inventory().expect("valid registry");
    assert!(registry.contains::<CacheFlushed>());
    assert!(registry.contains::<UserRenamed>());
    let flushed: CacheFlushed = registry
        .decode_as("cache.flushed", 1, b"null")
        .expect("decodes");
    assert_eq!(flushed, CacheFlushed);
    let renamed: UserRenamed = registry
        .decode_as("user.renamed", 2, br#"[7,"Ada"]"#)
        .expect("decodes");
    assert_eq!(renamed, UserRenamed(7, "Ada".to_owned()));
}
