//! The prelude parts a script keeps, and the delay scripts' hashes.

use super::with_prelude;

const PRELUDE: &str = "-- the header
local A = 1
-- b reads A
local function b() return A end
local function c() return 2 end

local D, E = {}, 0
local function f(x)
  if x then
    -- b() in a comment line keeps nothing
    return c() -- a trailing comment: D
  end
end
";

fn kept(body: &str) -> String {
    let out = with_prelude(PRELUDE, body);
    out.strip_suffix(body).unwrap().to_string()
}

#[test]
fn a_script_gets_the_parts_it_names_and_what_they_name() {
    assert_eq!(
        kept("return b()"),
        "-- the header\nlocal A = 1\n-- b reads A\nlocal function b() return A end\n\n"
    );
    let k = kept("return f(1) + E");
    assert!(!k.contains("local A") && !k.contains("function b"), "{k}");
    assert!(
        k.contains("local function c()") && k.contains("local D, E"),
        "{k}"
    );
    assert!(k.ends_with("  end\nend\n\n"), "{k}");
    assert_eq!(kept("return 1"), "\n");
    // A name in the body's comment lines keeps nothing.
    assert_eq!(kept("-- c()\nreturn 1"), "\n");
}

#[test]
fn every_delay_script_file_has_a_hash() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/scripts/delay");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap();
        let kit_only = ["travel", "idle"].contains(&name);
        if ["prelude", "far", "far_place"].contains(&name)
            || (kit_only && !cfg!(feature = "testing"))
        {
            continue;
        }
        let hash = crate::protocol::delay_script_hash(name);
        assert_eq!(hash.map(str::len), Some(40), "{name}");
    }
    assert_eq!(crate::protocol::delay_script_hash("prelude"), None);
}

#[test]
fn unindented_statements_that_are_not_locals_are_always_kept() {
    let prelude = "local function a() end\nredis.setresp(3)\nlocal function b()\n  a()\nend\n";
    assert_eq!(
        with_prelude(prelude, "return 1"),
        "redis.setresp(3)\n\nreturn 1"
    );
    assert_eq!(with_prelude(prelude, "b()"), format!("{prelude}\nb()"));
}

#[test]
fn the_delay_queues_claim_and_ack_get_only_part_of_the_prelude() {
    let prelude = [
        include_str!("../scripts/delay/prelude.lua"),
        include_str!("../scripts/delay/far.lua"),
        include_str!("../scripts/delay/far_place.lua"),
    ]
    .join("\n");
    let functions = |t: &str| t.matches("\nlocal function ").count();
    let all = functions(&prelude);
    // (56 functions in all: claim_due keeps 31, ack 7.)
    for (body, most) in [
        (include_str!("../scripts/delay/claim_due.lua"), all * 2 / 3),
        (include_str!("../scripts/delay/ack.lua"), all / 4),
    ] {
        let got = functions(&with_prelude(&prelude, body)) - functions(body);
        assert!(got <= most, "{got} of {all} functions");
    }
}
