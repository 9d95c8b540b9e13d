//! C names of the generated code: user identifiers kept apart from the
//! generator's own, and the buffer of each tensor.

use autotune_lang::ir::{Operator, TensorRef};

/// C keywords and names the generated code uses itself; a user name equal to one
/// of them gets a trailing `_`.
const RESERVED: &[&str] = &[
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "out", "status", "ctx", "int64_t", "int32_t",
    "INFINITY", "NAN", "NULL",
];

/// The C name of a user's index variable or shape.
pub fn c_ident(name: &str) -> String {
    // Generated names contain `__` (tiled code) or start with `in_`, `st_`, `acc`:
    // user names are kept apart from both.
    let name = name.replace("__", "_0_");
    let generated = name.starts_with("in_")
        || name.starts_with("st_")
        || (name.starts_with("acc") && name[3..].chars().all(|c| c.is_ascii_digit()));
    if RESERVED.contains(&name.as_str()) || generated || name.starts_with('_') {
        format!("{name}_")
    } else {
        name
    }
}

/// The C name of a tensor's buffer.
pub fn buffer_name(op: &Operator, t: TensorRef) -> String {
    match t {
        TensorRef::Input(i) => format!("in_{}", op.inputs[i].name),
        TensorRef::Stage(s) if s + 1 == op.stages.len() => "out".to_string(),
        TensorRef::Stage(s) => format!("st_{}", op.stages[s].name),
    }
}

/// The C name of constant input `i`'s slot parameter.
pub fn slot_name(op: &Operator, i: usize) -> String {
    format!("{}__slot", buffer_name(op, TensorRef::Input(i)))
}

/// The prefix of a tiled stage's buffer of partial sums kept apart from its
/// output ([`super::tiled`]).
pub const PARTIAL_SUMS: &str = "ps__";
