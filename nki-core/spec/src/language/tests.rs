use super::*;
use crate::isa::{Default, INSTRUCTIONS, Kind, signature_problems};
use std::collections::HashSet;

#[test]
fn names_are_unique() {
    let mut seen = HashSet::new();
    for (name, _) in names() {
        assert!(seen.insert(name), "nl.{name} is declared twice");
    }
    for table in [
        OPERATORS.iter().map(|o| o.name).collect::<Vec<_>>(),
        ACTIVATIONS.iter().map(|a| a.name).collect(),
        TILE_SIZES.iter().map(|t| t.name).collect(),
    ] {
        let unique: HashSet<_> = table.iter().collect();
        assert_eq!(unique.len(), table.len(), "{table:?}");
    }
}

#[test]
fn signatures_are_valid_python() {
    for f in FUNCTIONS {
        let problems = signature_problems(f.params);
        assert!(problems.is_empty(), "nl.{}: {problems:?}", f.name);
    }
}

#[test]
fn functions_sit_in_function_categories() {
    for f in FUNCTIONS {
        assert!(
            !matches!(
                f.category,
                Category::DType | Category::Constant | Category::Class
            ),
            "nl.{} is a function in {:?}",
            f.name,
            f.category
        );
    }
    for n in OTHER_NAMES {
        assert!(
            matches!(n.category, Category::Constant | Category::Class),
            "nl.{}",
            n.name
        );
    }
}

#[test]
fn defaults_name_declared_dtypes_and_buffers() {
    for f in FUNCTIONS {
        for p in f.params {
            match p.default {
                Default::DType(d) => assert!(dtype(d).is_some(), "nl.{}.{}", f.name, p.name),
                Default::Buffer(b) => assert!(buffer(b).is_some(), "nl.{}.{}", f.name, p.name),
                _ => {}
            }
        }
    }
    for b in BUFFERS {
        if let Some(of) = b.alias_of {
            let target = buffer(of).unwrap_or_else(|| panic!("nl.{} aliases nl.{of}", b.name));
            assert_eq!((target.on_chip, target.shared), (b.on_chip, b.shared));
        }
    }
}

#[test]
fn every_dtype_has_a_size_its_format_fits() {
    for d in DTYPES {
        assert!(d.bits > 0 && d.bits % 8 == 0, "{}: {} bits", d.name, d.bits);
        match d.class {
            DTypeClass::Bool => assert_eq!(d.bits, 8, "{}", d.name),
            DTypeClass::Signed | DTypeClass::Unsigned => {
                assert!([8, 16, 32].contains(&d.bits), "{}", d.name);
                assert!(d.name.ends_with(&d.bits.to_string()), "{}", d.name);
            }
            DTypeClass::Float(f) => assert!(f.bits() <= d.bits, "{}", d.name),
            DTypeClass::Packed { lanes, element } => {
                assert_eq!(u32::from(lanes) * element.bits(), d.bits, "{}", d.name);
                assert!(d.name.ends_with(&format!("_x{lanes}")), "{}", d.name);
                assert!(
                    d.torch.is_none(),
                    "{}: torch has no packed MX types",
                    d.name
                );
            }
        }
        assert!(d.bytes() >= 1);
    }
    assert_eq!(dtype("float8_e4m3fn").unwrap().torch, Some("float8_e4m3fn"));
    assert_eq!(dtype("float32").unwrap().bytes(), 4);
    assert!(dtype("float4_e2m1fn_x4").unwrap().is_float());
    assert!(dtype("bool_").unwrap().is_integer());
    assert!(dtype("float64").is_none());
}

#[test]
fn dtype_names_spell_their_formats() {
    // `float8_e4m3fn` promises 4 exponent and 3 mantissa bits; check every float name that way.
    for d in DTYPES {
        let element = match d.class {
            DTypeClass::Float(f) => f,
            DTypeClass::Packed { element, .. } => element,
            _ => continue,
        };
        if let Some(rest) = d.name.split('_').nth(1).filter(|r| r.starts_with('e')) {
            let digits: Vec<u8> = rest[1..]
                .split('m')
                .map(|n| {
                    n.trim_end_matches(|c: char| c.is_ascii_alphabetic())
                        .parse()
                        .unwrap()
                })
                .collect();
            assert_eq!(digits, [element.exponent, element.mantissa], "{}", d.name);
        }
        if let Some(width) = d.name.strip_prefix("float") {
            let width: u32 = width.split('_').next().unwrap().parse().unwrap();
            assert_eq!(element.bits(), width, "{}", d.name);
        }
    }
}

#[test]
fn operators_and_activations_are_nl_names() {
    for name in OPERATORS
        .iter()
        .map(|o| o.name)
        .chain(ACTIVATIONS.iter().map(|a| a.name))
    {
        let constant = other_name(name).is_some_and(|n| n.category == Category::Constant);
        assert!(
            function(name).is_some() || constant,
            "nl.{name} is neither a function nor a constant"
        );
    }
    for o in OPERATORS {
        assert!(o.elementwise || o.reduce, "nl.{} has no use", o.name);
        if o.reduce {
            assert_eq!(o.arity, Arity::Binary, "nl.{}", o.name);
        }
    }
}

#[test]
fn instruction_operator_defaults_are_operators() {
    for inst in INSTRUCTIONS {
        for p in inst.params {
            let Default::Operator(name) = p.default else {
                continue;
            };
            let op =
                operator(name).unwrap_or_else(|| panic!("{}.{}: nl.{name}", inst.name, p.name));
            if p.name.starts_with("reduce") {
                assert!(
                    op.reduce,
                    "{}.{}: nl.{name} cannot reduce",
                    inst.name, p.name
                );
            }
            if p.name.starts_with("cmp") {
                assert_eq!(op.class, OpClass::Comparison, "{}.{}", inst.name, p.name);
            }
        }
        for p in inst.params {
            assert_ne!(
                p.kind,
                Kind::DType,
                "{}: nisa takes no dtype= in NKI 0.7",
                inst.name
            );
        }
    }
}

#[test]
fn input_ranges_hold_what_the_table_says() {
    let range = |name| activation(name).unwrap().range;
    assert!(range("exp").contains(1e30));
    assert!(range("log").contains(1.0) && !range("log").contains(0.0));
    assert!(range("reciprocal").contains(-1.0) && !range("reciprocal").contains(2f64.powi(43)));
    assert!(range("sin").contains(3.0) && !range("sin").contains(9.0));
    assert!(!range("sqrt").contains(-1.0));
}

#[test]
fn tile_sizes_agree_with_each_other() {
    let v = |name, version| tile_size(name).unwrap().on(version);
    for version in NcVersion::ALL {
        for t in TILE_SIZES {
            assert!(t.on(version) > 0, "{} on {version:?}", t.name);
        }
        assert_eq!(v("sbuf_fmax", version) * 4, v("sbuf_fmax_bytes", version));
        assert_eq!(
            v("total_available_sbuf_size", version),
            v("sbuf_fmax_bytes", version)
        );
        assert!(
            v("sbuf_fmax_bytes", version) * v("pmax", version) <= v("sbuf_size_bytes", version)
        );
        assert_eq!(
            v("psum_bank_fmax", version) * 4,
            v("psum_bank_fmax_bytes", version)
        );
        assert_eq!(v("psum_fmax", version), v("psum_bank_fmax", version));
        assert_eq!(v("gemm_moving_fmax", version), v("psum_bank_fmax", version));
    }
    assert!(v("sbuf_size_bytes", NcVersion::Gen2) < v("sbuf_size_bytes", NcVersion::Gen4));
}

#[test]
fn tables_serialise() {
    let text = serde_json::to_string(&(FUNCTIONS, DTYPES, BUFFERS, OTHER_NAMES)).unwrap();
    assert!(text.contains(r#""name":"fori_loop""#), "{text}");
    let text = serde_json::to_string(&(OPERATORS, ACTIVATIONS, TILE_SIZES)).unwrap();
    assert!(text.contains(r#""name":"bypass""#), "{text}");
}
