//! `GET /openapi.json`: the OpenAPI 3.1 description of the HTTP API, a static document
//! (`openapi.json` beside this file) compiled into the binary.
//!
//! Written by hand rather than derived from the handlers (utoipa): the handlers take the raw
//! request and answer by hand (text or JSON by `Accept`, `no-store`, streamed batches, the
//! refusals' headers), which annotations would restate anyway, and a static file costs no
//! dependency and no start-up work. It cannot drift unnoticed: the tests below hold it to the
//! router's one table ([`Route::ALL`]) and to the 405 answer's methods, `cli/tests/serve_ops.rs`
//! checks every status and body a running server gives against it, and `.ci/run` validates
//! it with `openapi-spec-validator`.

/// The document, served as it is (it ends with a newline, like every JSON body).
pub const DOCUMENT: &str = include_str!("openapi.json");

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::Value;

    use super::DOCUMENT;
    use crate::serve::http::{ALLOW, Route, api};

    fn document() -> Value {
        serde_json::from_str(DOCUMENT).expect("openapi.json is JSON")
    }

    /// The keys of a path item that are operations (HTTP methods), not shared fields.
    const NOT_METHODS: [&str; 5] = ["summary", "description", "servers", "parameters", "$ref"];

    #[test]
    fn every_route_the_router_serves_is_described_and_nothing_else() {
        let doc = document();
        let paths = doc["paths"].as_object().expect("paths");
        let described: BTreeSet<&str> = paths.keys().map(String::as_str).collect();
        let served: BTreeSet<&str> = Route::ALL.into_iter().map(Route::path).collect();
        assert_eq!(described, served);
        let methods: BTreeSet<String> = ALLOW.split(", ").map(str::to_lowercase).collect();
        for (path, item) in paths {
            let ops: BTreeSet<String> = item
                .as_object()
                .expect("a path item")
                .keys()
                .filter(|k| !NOT_METHODS.contains(&k.as_str()))
                .cloned()
                .collect();
            assert_eq!(
                ops, methods,
                "{path}: the methods the router serves ({ALLOW})"
            );
        }
        assert_eq!(
            doc["components"]["headers"]["Allow"]["schema"]["const"],
            ALLOW
        );
    }

    #[test]
    fn the_document_is_openapi_3_1_of_this_version() {
        let doc = document();
        assert_eq!(doc["openapi"], "3.1.0");
        assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
        assert!(DOCUMENT.ends_with("}\n"), "one object and a newline");
    }

    /// Every `$ref` points at something in the document.
    #[test]
    fn every_reference_resolves() {
        fn walk(doc: &Value, v: &Value, n: &mut usize) {
            match v {
                Value::Object(map) => {
                    if let Some(Value::String(r)) = map.get("$ref") {
                        let pointer = r.strip_prefix('#').expect("a local reference");
                        assert!(doc.pointer(pointer).is_some(), "{r} resolves");
                        *n += 1;
                    }
                    map.values().for_each(|v| walk(doc, v, n));
                }
                Value::Array(items) => items.iter().for_each(|v| walk(doc, v, n)),
                _ => {}
            }
        }
        let doc = document();
        let mut n = 0;
        walk(&doc, &doc, &mut n);
        assert!(n > 20, "{n} references");
    }

    /// Each `{name}` of a path is a path parameter of each of its operations, and no other.
    #[test]
    fn path_parameters_match_their_paths() {
        let doc = document();
        for (path, item) in doc["paths"].as_object().unwrap() {
            let in_path: BTreeSet<&str> = path
                .split('/')
                .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
                .collect();
            for (method, op) in item.as_object().unwrap() {
                let declared: BTreeSet<&str> = op["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|p| p["in"] == "path")
                    .map(|p| p["name"].as_str().unwrap())
                    .collect();
                assert_eq!(declared, in_path, "{method} {path}");
            }
        }
    }

    /// The 404 answer's example is the answer the fallback gives.
    #[test]
    fn the_not_found_example_is_the_served_message() {
        let doc = document();
        let example = &doc["components"]["responses"]["NotFound"]["content"]["application/json"]["example"]
            ["error"];
        assert_eq!(
            example.as_str().unwrap(),
            format!("no such path: /v2/id; the API is {}", api())
        );
    }
}
