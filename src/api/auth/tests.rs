use super::keys::parse_file;
use super::*;
use std::path::Path;

const READ: &str = "read-key-0123456789";
const WRITE: &str = "write-key-0123456789";
const ADMIN: &str = "admin-key-0123456789";

/// SHA-256 of `ADMIN`, as `sha256sum` prints it.
fn admin_sha256() -> String {
    use sha2::Digest;
    sha2::Sha256::digest(ADMIN.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn file(text: &str, name: &str) -> Result<KeySet, KeyError> {
    parse_file(text, Path::new(name))
}

fn role_of(set: &KeySet, key: &str) -> Option<(String, Role)> {
    set.verify(key.as_bytes()).map(|c| (c.name.to_string(), c.role))
}

#[test]
fn toml_file_with_keys_and_a_digest() {
    let text = format!(
        "[[keys]]\nname = \"reader\"\nrole = \"read\"\nkey = \"{READ}\"\n\n\
         [[keys]]\nname = \"ops\"\nrole = \"admin\"\nsha256 = \"{}\"\n",
        admin_sha256().to_uppercase()
    );
    let set = file(&text, "keys.toml").unwrap();
    assert_eq!(set.len(), 2);
    assert_eq!(role_of(&set, READ), Some(("reader".into(), Role::Read)));
    assert_eq!(role_of(&set, ADMIN), Some(("ops".into(), Role::Admin)));
    assert_eq!(role_of(&set, WRITE), None);
    assert_eq!(role_of(&set, &READ[..READ.len() - 1]), None);
    assert_eq!((set.count(Role::Read), set.count(Role::Write), set.count(Role::Admin)), (1, 0, 1));
}

#[test]
fn json_file_by_extension_or_by_content() {
    let text = format!(
        r#"{{"keys": [{{"name": "w", "role": "write", "key": "{WRITE}"}}, {{"name": "a", "role": "admin", "sha256": "{}"}}]}}"#,
        admin_sha256()
    );
    for name in ["keys.json", "keys.conf", "keys"] {
        let set = file(&text, name).unwrap();
        assert_eq!(role_of(&set, WRITE), Some(("w".into(), Role::Write)), "{name}");
        assert_eq!(role_of(&set, ADMIN), Some(("a".into(), Role::Admin)), "{name}");
    }
    // without an extension, TOML is tried after JSON
    let toml = format!("[[keys]]\nname = \"w\"\nrole = \"write\"\nkey = \"{WRITE}\"\n");
    assert_eq!(role_of(&file(&toml, "keys").unwrap(), WRITE), Some(("w".into(), Role::Write)));
    // but a .json file is JSON
    assert!(matches!(file(&toml, "keys.json"), Err(KeyError::Parse { .. })));
}

#[test]
fn weak_keys_are_refused() {
    let err = file("[[keys]]\nname = \"ci\"\nrole = \"admin\"\nkey = \"short-key-123\"\n", "k.toml").unwrap_err();
    assert!(matches!(err, KeyError::Weak { .. }), "{err}");
    let message = err.to_string();
    assert!(message.contains("weak key") && message.contains("\"ci\""), "{message}");
    assert!(!message.contains("short-key-123"), "the key is in the message: {message}");
    // 16 characters is enough
    assert!(KeySet::parse_env("ci:admin:0123456789abcdef").is_ok());
    assert!(matches!(KeySet::parse_env("ci:admin:0123456789abcde"), Err(KeyError::Weak { .. })));
}

#[test]
fn bad_entries_are_refused_without_quoting_the_key() {
    let cases = [
        ("[[keys]]\nname = \"a\"\nrole = \"root\"\nkey = \"0123456789abcdef\"\n", "role \"root\""),
        ("[[keys]]\nname = \"a\"\nrole = \"read\"\n", "needs key or sha256"),
        ("[[keys]]\nname = \"a\"\nrole = \"read\"\nkey = \"0123456789abcdef\"\nsha256 = \"00\"\n", "not both"),
        ("[[keys]]\nname = \"a\"\nrole = \"read\"\nsha256 = \"abc\"\n", "64 hexadecimal digits"),
        ("[[keys]]\nname = \"a b\"\nrole = \"read\"\nkey = \"0123456789abcdef\"\n", "the name must be"),
        ("[[keys]]\nname = \"a\"\nrole = \"read\"\nkey = \"0123456789 abcdef\"\n", "visible ASCII"),
        ("[[keys]]\nname = \"a\"\nrole = \"read\"\nkey = 1234567890123456789\n", "must be a string"),
        ("[[keys]]\nname = \"a\"\nrole = \"read\"\nkey = \"0123456789abcdef\"\nextra = 1\n", "unknown field"),
        ("keys = []\n", "defines no keys"),
    ];
    for (text, expected) in cases {
        let message = file(text, "k.toml").unwrap_err().to_string();
        assert!(message.contains(expected), "{text:?}: {message}");
        for secret in ["0123456789abcdef", "1234567890123456789"] {
            assert!(!message.contains(secret), "{text:?}: the key is in {message}");
        }
    }
    let json = r#"{"keys": [{"name": "a", "role": "read", "key": 1234567890123456789}]}"#;
    let message = file(json, "k.json").unwrap_err().to_string();
    assert!(message.contains("must be a string") && !message.contains("1234567890123456789"), "{message}");
}

#[test]
fn toml_syntax_errors_name_the_line_not_the_text() {
    let text = "[[keys]]\nname = \"a\"\nrole = \"read\"\nkey = \"0123456789abcdef-unterminated\n";
    let message = file(text, "k.toml").unwrap_err().to_string();
    assert!(message.contains("line 4"), "{message}");
    assert!(!message.contains("0123456789abcdef"), "the key is in {message}");
}

#[test]
fn duplicate_names_and_keys_are_refused() {
    let err = KeySet::parse_env(&format!("a:read:{READ},a:write:{WRITE}")).unwrap_err();
    assert!(matches!(err, KeyError::DuplicateName { .. }), "{err}");
    let err = KeySet::parse_env(&format!("a:read:{READ},b:write:{READ}")).unwrap_err();
    assert!(matches!(err, KeyError::DuplicateKey { .. }), "{err}");
    assert!(!err.to_string().contains(READ));
    // across the file and the environment too, also when the file holds only the digest
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.toml");
    std::fs::write(&path, format!("[[keys]]\nname = \"ops\"\nrole = \"admin\"\nsha256 = \"{}\"\n", admin_sha256()))
        .unwrap();
    let err = KeySet::load(Some(&path), Some(&format!("other:read:{ADMIN}"))).unwrap_err();
    assert!(matches!(err, KeyError::DuplicateKey { .. }), "{err}");
    let err = KeySet::load(Some(&path), Some(&format!("ops:read:{READ}"))).unwrap_err();
    assert!(matches!(err, KeyError::DuplicateName { .. }), "{err}");
    let set = KeySet::load(Some(&path), Some(&format!("r:read:{READ}"))).unwrap();
    assert_eq!((role_of(&set, READ).unwrap().1, role_of(&set, ADMIN).unwrap().1), (Role::Read, Role::Admin));
    let err = KeySet::load(Some(&dir.path().join("missing.toml")), None).unwrap_err();
    assert!(matches!(err, KeyError::Read { .. }), "{err}");
}

#[test]
fn env_entries() {
    let set = KeySet::parse_env(&format!(" r:read:{READ} , w:write:{WRITE}:with:colons,,a:admin:{ADMIN},")).unwrap();
    assert_eq!(set.len(), 3);
    assert_eq!(role_of(&set, READ), Some(("r".into(), Role::Read)));
    assert_eq!(role_of(&set, &format!("{WRITE}:with:colons")), Some(("w".into(), Role::Write)));
    assert!(KeySet::parse_env("").unwrap().is_empty());
    let err = KeySet::parse_env(&format!("r:read:{READ},{ADMIN}")).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("#2") && message.contains("name:role:key"), "{message}");
    assert!(!message.contains(ADMIN), "{message}");
    assert!(KeySet::parse_env(&format!("r:reader:{READ}")).unwrap_err().to_string().contains("\"reader\""));
    // nothing of a key in Debug
    assert!(!format!("{set:?}").contains("key-0123"), "{set:?}");
}

#[test]
fn authorization_header_schemes() {
    use axum::http::HeaderMap;
    let key = |value: &str| {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", value.parse().unwrap());
        match presented(&headers) {
            Presented::Nothing => None,
            Presented::Key(k) => Some(String::from_utf8(k.to_vec()).unwrap()),
        }
    };
    assert_eq!(key("Bearer abc").as_deref(), Some("abc"));
    assert_eq!(key("bearer   abc ").as_deref(), Some("abc"));
    assert_eq!(key("Token abc").as_deref(), Some("abc"));
    assert_eq!(key("TOKEN abc").as_deref(), Some("abc"));
    assert_eq!(key("Basic abc"), None);
    assert_eq!(key("Bearer"), None);
    assert_eq!(key("Bearer "), None);
    assert_eq!(key("abc"), None);
    assert!(matches!(presented(&HeaderMap::new()), Presented::Nothing));
}

#[test]
fn exposure_rule() {
    let open = Access::default();
    for addr in ["127.0.0.1:8080", "127.1.2.3:1", "[::1]:8080", "[::ffff:127.0.0.1]:80"] {
        assert!(open.check_exposure(addr.parse().unwrap()).is_ok(), "{addr}");
    }
    for addr in ["0.0.0.0:8080", "[::]:8080", "10.0.0.5:8080"] {
        let message = open.check_exposure(addr.parse().unwrap()).unwrap_err();
        assert!(message.contains("--allow-unauthenticated") && message.contains("MOSAIC_API_KEYS"), "{message}");
    }
    let allowed = Access { allow_unauthenticated: true, ..Access::default() };
    assert!(allowed.check_exposure("0.0.0.0:8080".parse().unwrap()).is_ok());
    let keyed = Access { keys: KeySet::parse_env(&format!("a:admin:{ADMIN}")).unwrap(), ..Access::default() };
    assert!(keyed.check_exposure("0.0.0.0:8080".parse().unwrap()).is_ok());
    assert!(keyed.describe().contains("1 API key(s): 0 read, 0 write, 1 admin"), "{}", keyed.describe());
    assert!(!keyed.describe().contains(ADMIN));
}
