//! From a `#[tensor_op]` function (as `syn` sees it) to a checked [`Operator`].
//!
//! Every error is a `syn::Error` on the offending tokens, with a message that says
//! what the language accepts; the macro turns it into a compile error, the build
//! helper into `file:line:column`.

use std::collections::BTreeMap;

use proc_macro2::{Span, TokenStream};
use syn::parse::Parser as _;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{
    BinOp, Expr as SynExpr, FnArg, GenericArgument, Ident, ItemFn, Lit, Meta, Pat, PathArguments,
    RangeLimits, ReturnType, Stmt, Token, Type, UnOp,
};

use crate::ir::*;

type Result<T> = syn::Result<T>;

/// `node.err(msg)`: an error spanning all of a syntax node (first to last token).
trait ErrAt {
    fn err(&self, msg: impl std::fmt::Display) -> syn::Error;
}

impl<T: quote::ToTokens> ErrAt for T {
    fn err(&self, msg: impl std::fmt::Display) -> syn::Error {
        syn::Error::new_spanned(self, msg)
    }
}

const SUPPORTED_FUNCTIONS: &str = "supported are exp, log, tanh, sqrt, abs, max(a, b), min(a, b), \
     and the reductions sum(|k| ..), max(|k| ..), min(|k| ..)";

/// Parses the attribute arguments and the function of a `#[tensor_op]`.
pub fn parse_operator(attr: TokenStream, item: &ItemFn) -> Result<Operator> {
    let attr = parse_attr(attr)?;
    let mut p = OpParser {
        dtype: None,
        shape_vars: Vec::new(),
        shape_names: BTreeMap::new(),
        inputs: Vec::new(),
        stages: Vec::new(),
        tensors: BTreeMap::new(),
    };
    p.signature(item, &attr)?;
    p.body(item)?;
    let mut op = Operator {
        name: item.sig.ident.to_string(),
        dtype: p.dtype.map(|(d, _)| d).unwrap_or(DType::F32),
        shape_vars: p.shape_vars,
        inputs: p.inputs,
        stages: p.stages,
        specializations: Vec::new(),
        constants: Vec::new(),
        blocked: Vec::new(),
    };
    op.constants = named_inputs(&op, "constant", &attr.constant)?;
    op.blocked = named_inputs(&op, "blocked", &attr.blocked)?;
    if let Some(name) = attr
        .blocked
        .iter()
        .find(|n| op.constants.iter().any(|&c| **n == op.inputs[c].name))
    {
        return Err(name.err(format!(
            "`{name}` is declared both `constant` and `blocked`: a constant's layout is its \
             kernel's choice, `blocked` is for activations passed from one operator to the next"
        )));
    }
    if let Some(name) = attr
        .blocked
        .iter()
        .find(|n| op.inputs.iter().any(|t| **n == t.name && t.dims.is_empty()))
    {
        return Err(name.err(format!(
            "`{name}` is a scalar: `blocked` blocks a tensor's first dimension"
        )));
    }
    op.specializations = specializations(&op, &p.shape_names, &attr.specialize)?;
    Ok(op)
}

/// The inputs `constant(...)` or `blocked(...)` names, by index in declaration order.
fn named_inputs(op: &Operator, what: &str, names: &[Ident]) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for name in names {
        let Some(i) = op.inputs.iter().position(|t| *name == t.name) else {
            let inputs: Vec<&str> = op.inputs.iter().map(|t| t.name.as_str()).collect();
            return Err(name.err(format!(
                "`{what}` names `{name}`, which is not an input of `{}` (its inputs are {})",
                op.name,
                inputs.join(", ")
            )));
        };
        if out.contains(&i) {
            return Err(name.err(format!("`{name}` is named {what} twice")));
        }
        out.push(i);
    }
    out.sort_unstable();
    Ok(out)
}

/// What the attribute holds: `specialize(M = 64, ...)` lists, derived shapes `OH = expr`
/// and the inputs named in `constant(w, ...)` and `blocked(x, ...)`.
struct Attr {
    specialize: Vec<(Span, Vec<(Ident, SynExpr)>)>,
    derived: Vec<(Ident, SynExpr)>,
    constant: Vec<Ident>,
    blocked: Vec<Ident>,
}

fn parse_attr(attr: TokenStream) -> Result<Attr> {
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(attr)?;
    let mut out = Attr {
        specialize: Vec::new(),
        derived: Vec::new(),
        constant: Vec::new(),
        blocked: Vec::new(),
    };
    let expected = "expected `specialize(NAME = size, ...)`, `constant(input, ...)`, \
                    `blocked(input, ...)` or a derived shape `NAME = expression`";
    for meta in metas {
        match meta {
            Meta::List(list) if list.path.is_ident("specialize") => {
                let pairs = Punctuated::<syn::MetaNameValue, Token![,]>::parse_terminated
                    .parse2(list.tokens.clone())?;
                let mut values = Vec::new();
                for nv in pairs {
                    let Some(name) = nv.path.get_ident() else {
                        return Err(nv.path.err("expected a shape name"));
                    };
                    values.push((name.clone(), nv.value));
                }
                out.specialize.push((list.span(), values));
            }
            Meta::List(list) if list.path.is_ident("constant") => {
                let names =
                    Punctuated::<Ident, Token![,]>::parse_terminated.parse2(list.tokens.clone())?;
                out.constant.extend(names);
            }
            Meta::List(list) if list.path.is_ident("blocked") => {
                let names =
                    Punctuated::<Ident, Token![,]>::parse_terminated.parse2(list.tokens.clone())?;
                out.blocked.extend(names);
            }
            Meta::NameValue(nv) => match nv.path.get_ident() {
                Some(name) => out.derived.push((name.clone(), nv.value)),
                None => return Err(nv.path.err(expected)),
            },
            other => return Err(other.err(expected)),
        }
    }
    Ok(out)
}

struct OpParser {
    /// The element type and the tensor that fixed it.
    dtype: Option<(DType, String)>,
    shape_vars: Vec<ShapeVar>,
    shape_names: BTreeMap<String, ShapeVarId>,
    inputs: Vec<TensorDecl>,
    stages: Vec<Stage>,
    tensors: BTreeMap<String, TensorRef>,
}

/// A parsed `Tensor<f32, (M, K)>`.
struct TensorType {
    dims: Vec<Ident>,
}

impl OpParser {
    fn signature(&mut self, item: &ItemFn, attr: &Attr) -> Result<()> {
        let sig = &item.sig;
        if let Some(g) = sig.generics.params.first() {
            return Err(g.err(
                "a tensor operator takes no generic parameters: shapes are named in the tensor types",
            ));
        }
        let derived: Vec<String> = attr.derived.iter().map(|(n, _)| n.to_string()).collect();
        let mut params = Vec::new();
        for arg in &sig.inputs {
            let FnArg::Typed(pt) = arg else {
                return Err(arg.err("a tensor operator is a free function, not a method"));
            };
            let Pat::Ident(pi) = &*pt.pat else {
                return Err(pt.pat.err("expected a tensor name"));
            };
            let name = pi.ident.to_string();
            if self.tensors.contains_key(&name) {
                return Err(pi.ident.err(format!("duplicate tensor name `{name}`")));
            }
            let ty = self.tensor_type(&pt.ty, &name)?;
            // The first input dimension that names a shape gives it its value.
            for (d, dim) in ty.dims.iter().enumerate() {
                let dn = dim.to_string();
                if !derived.contains(&dn) && !self.shape_names.contains_key(&dn) {
                    self.shape_names.insert(dn.clone(), self.shape_vars.len());
                    self.shape_vars.push(ShapeVar {
                        name: dn,
                        kind: ShapeVarKind::Input {
                            tensor: self.inputs.len() + params.len(),
                            dim: d,
                        },
                    });
                }
            }
            self.tensors
                .insert(name.clone(), TensorRef::Input(params.len()));
            params.push((name, ty));
        }
        for (name, expr) in &attr.derived {
            let n = name.to_string();
            if self.shape_names.contains_key(&n) {
                return Err(name.err(format!("shape `{n}` is declared twice")));
            }
            let e = self.shape_expr(expr)?;
            self.shape_names.insert(n.clone(), self.shape_vars.len());
            self.shape_vars.push(ShapeVar {
                name: n,
                kind: ShapeVarKind::Derived(e),
            });
        }
        for (name, ty) in params {
            let dims = self.dims(&ty.dims)?;
            self.inputs.push(TensorDecl { name, dims });
        }
        for name in self.shape_names.keys() {
            if self.tensors.contains_key(name) {
                return Err(sig.ident.err(format!(
                    "`{name}` names both a tensor and a shape; use distinct names"
                )));
            }
        }
        Ok(())
    }

    fn dims(&self, dims: &[Ident]) -> Result<Vec<Extent>> {
        dims.iter()
            .map(|d| match self.shape_names.get(&d.to_string()) {
                Some(v) => Ok(Extent::Var(*v)),
                None => Err(d.err(format!(
                    "undeclared shape name `{d}`: a shape gets its size from an input tensor's type \
                     or from the attribute, e.g. #[tensor_op({d} = (H - R) / 2 + 1)]"
                ))),
            })
            .collect()
    }

    fn tensor_type(&mut self, ty: &Type, tensor: &str) -> Result<TensorType> {
        let expected =
            "expected a tensor type `Tensor<f32, (M, K)>`: the element type (f32 or f64) \
                        and a tuple of shape names";
        let Type::Path(tp) = ty else {
            return Err(ty.err(expected));
        };
        let seg = tp.path.segments.last().ok_or_else(|| ty.err(expected))?;
        if seg.ident != "Tensor" {
            return Err(ty.err(expected));
        }
        let PathArguments::AngleBracketed(args) = &seg.arguments else {
            return Err(ty.err(expected));
        };
        let args: Vec<_> = args.args.iter().collect();
        let [GenericArgument::Type(elem), shape] = args.as_slice() else {
            return Err(seg.err(expected));
        };
        let dtype = match elem {
            Type::Path(p) if p.path.is_ident("f32") => DType::F32,
            Type::Path(p) if p.path.is_ident("f64") => DType::F64,
            other => {
                return Err(other.err(
                    "unsupported element type: tensors hold f32 or f64, one type per operator",
                ))
            }
        };
        match &self.dtype {
            None => self.dtype = Some((dtype, tensor.to_string())),
            Some((d, first)) if *d != dtype => {
                return Err(elem.err(format!(
                    "mismatched element types: `{tensor}` is {dtype} but `{first}` is {d}; \
                     all tensors of an operator share one element type"
                )))
            }
            Some(_) => {}
        }
        let literal_hint =
            "tensor dimensions are shape names; give a fixed size in the attribute, \
                            e.g. #[tensor_op(R = 3)]";
        let dim_ident = |t: &Type| match t {
            Type::Path(p) => p
                .path
                .get_ident()
                .cloned()
                .ok_or_else(|| t.err(literal_hint)),
            other => Err(other.err(literal_hint)),
        };
        let dims = match shape {
            GenericArgument::Type(Type::Tuple(t)) => {
                t.elems.iter().map(dim_ident).collect::<Result<_>>()?
            }
            GenericArgument::Type(Type::Paren(p)) => vec![dim_ident(&p.elem)?],
            GenericArgument::Type(t @ Type::Path(_)) => vec![dim_ident(t)?],
            other => return Err(other.err(literal_hint)),
        };
        Ok(TensorType { dims })
    }

    fn shape_expr(&self, e: &SynExpr) -> Result<ShapeExpr> {
        let bx = |e: &SynExpr| self.shape_expr(e).map(Box::new);
        Ok(match e {
            SynExpr::Lit(l) => match &l.lit {
                Lit::Int(i) => ShapeExpr::Const(i.base10_parse()?),
                other => return Err(other.err("a shape is an integer")),
            },
            SynExpr::Path(p) => match p.path.get_ident() {
                Some(id) => match self.shape_names.get(&id.to_string()) {
                    Some(v) => ShapeExpr::Var(*v),
                    None => {
                        return Err(id.err(format!(
                            "undeclared shape name `{id}`: a derived shape may use the shapes of \
                             the input tensors and earlier derived shapes"
                        )))
                    }
                },
                None => return Err(p.err("expected a shape name")),
            },
            SynExpr::Paren(p) => self.shape_expr(&p.expr)?,
            SynExpr::Group(g) => self.shape_expr(&g.expr)?,
            SynExpr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => {
                ShapeExpr::Sub(Box::new(ShapeExpr::Const(0)), bx(&u.expr)?)
            }
            SynExpr::Binary(b) => {
                let (l, r) = (bx(&b.left)?, bx(&b.right)?);
                match b.op {
                    BinOp::Add(_) => ShapeExpr::Add(l, r),
                    BinOp::Sub(_) => ShapeExpr::Sub(l, r),
                    BinOp::Mul(_) => ShapeExpr::Mul(l, r),
                    BinOp::Div(_) => ShapeExpr::Div(l, r),
                    _ => return Err(b.op.err("shape arithmetic supports + - * / only")),
                }
            }
            other => {
                return Err(other
                    .err("unsupported shape expression: use integers, shape names and + - * /"))
            }
        })
    }

    fn body(&mut self, item: &ItemFn) -> Result<()> {
        let ReturnType::Type(_, ret) = &item.sig.output else {
            return Err(item
                .sig
                .err("a tensor operator returns its output tensor: add `-> Tensor<f32, (M, N)>`"));
        };
        let out_ty = self.tensor_type(ret, "output")?;
        let out_dims = self.dims(&out_ty.dims)?;
        let stmts = &item.block.stmts;
        let stage_form = "expected `let name: Tensor<f32, (M, N)> = compute(|i, j| ..);` \
                          or, last, the output `compute(|i, j| ..)`";
        for (n, stmt) in stmts.iter().enumerate() {
            let last = n + 1 == stmts.len();
            match stmt {
                Stmt::Local(local) => {
                    let (Pat::Type(pt), Some(init)) = (&local.pat, &local.init) else {
                        return Err(local.err(stage_form));
                    };
                    let Pat::Ident(pi) = &*pt.pat else {
                        return Err(pt.pat.err("expected a stage name"));
                    };
                    let name = pi.ident.to_string();
                    if self.tensors.contains_key(&name) || self.shape_names.contains_key(&name) {
                        return Err(pi.ident.err(format!("the name `{name}` is already taken")));
                    }
                    let ty = self.tensor_type(&pt.ty, &name)?;
                    let dims = self.dims(&ty.dims)?;
                    self.stage(name.clone(), dims, &init.expr)?;
                    if last {
                        return Err(local.err(
                            "the body must end with the output: a final `compute(|..| ..)` without `;`",
                        ));
                    }
                }
                Stmt::Expr(e, None) if last => {
                    self.stage("output".to_string(), out_dims.clone(), e)?;
                }
                other => return Err(other.err(stage_form)),
            }
        }
        if stmts.is_empty() {
            return Err(item
                .block
                .err("the body is empty: end it with the output, e.g. `compute(|i, j| a[i][j])`"));
        }
        Ok(())
    }

    fn stage(&mut self, name: String, dims: Vec<Extent>, init: &SynExpr) -> Result<()> {
        let SynExpr::Call(call) = init else {
            return Err(init.err("a stage is defined by `compute(|i, j| expression)`"));
        };
        let is_compute = matches!(&*call.func, SynExpr::Path(p) if p.path.is_ident("compute"));
        let Some(SynExpr::Closure(closure)) = call.args.first().filter(|_| is_compute) else {
            return Err(init.err("a stage is defined by `compute(|i, j| expression)`"));
        };
        if call.args.len() != 1 {
            return Err(call.args.err("compute takes one closure"));
        }
        if closure.inputs.len() != dims.len() {
            return Err(closure.inputs.err(format!(
                "wrong rank: `{name}` has {} dimension(s) but the closure takes {} index variable(s)",
                dims.len(),
                closure.inputs.len()
            )));
        }
        let mut cx = StageCx::default();
        for (pat, extent) in closure.inputs.iter().zip(&dims) {
            let Pat::Ident(pi) = pat else {
                return Err(pat.err("expected an index variable name"));
            };
            self.bind_axis(&mut cx, &pi.ident, Some(*extent))?;
        }
        let body = self.expr(&closure.body, &mut cx)?;
        let n_spatial = dims.len();
        let axes = cx
            .axes
            .into_iter()
            .map(|(name, extent)| Axis {
                name,
                extent: extent.expect("every axis bound is resolved by its reduction"),
            })
            .collect();
        self.tensors
            .insert(name.clone(), TensorRef::Stage(self.stages.len()));
        self.stages.push(Stage {
            name,
            dims,
            axes,
            n_spatial,
            body,
        });
        Ok(())
    }

    fn bind_axis(&self, cx: &mut StageCx, id: &Ident, extent: Option<Extent>) -> Result<AxisId> {
        let name = id.to_string();
        if self.tensors.contains_key(&name) || self.shape_names.contains_key(&name) {
            return Err(id.err(format!(
                "index variable `{name}` shadows a tensor or shape of the same name"
            )));
        }
        if cx.scope.iter().any(|(n, _)| *n == name) {
            return Err(id.err(format!("index variable `{name}` is already bound")));
        }
        let a = cx.axes.len();
        cx.axes.push((name.clone(), extent));
        cx.scope.push((name, a));
        Ok(a)
    }

    fn expr(&self, e: &SynExpr, cx: &mut StageCx) -> Result<Expr> {
        let bx = |e: Expr| Box::new(e);
        Ok(match e {
            SynExpr::Lit(l) => Expr::Const(self.literal(&l.lit)?),
            SynExpr::Paren(p) => self.expr(&p.expr, cx)?,
            SynExpr::Group(g) => self.expr(&g.expr, cx)?,
            SynExpr::Block(b) => match b.block.stmts.as_slice() {
                [Stmt::Expr(inner, None)] if b.label.is_none() => self.expr(inner, cx)?,
                _ => return Err(b.err("a block in an operator body holds one expression")),
            },
            SynExpr::Path(p) => {
                if let Some(v) = self.float_const(p)? {
                    return Ok(Expr::Const(v));
                }
                let Some(id) = p.path.get_ident() else {
                    return Err(p.err("unknown name"));
                };
                let name = id.to_string();
                if let Some(v) = self.shape_names.get(&name) {
                    Expr::ShapeValue(*v)
                } else if cx.lookup(&name).is_some() {
                    return Err(id.err(format!(
                        "index variable `{name}` cannot be used as a value, only as an index"
                    )));
                } else if let Some(&tensor) = self.tensors.get(&name) {
                    // A rank-0 tensor (a scalar) is read by name.
                    if self.tensor_dims(tensor).is_empty() {
                        return Ok(Expr::Load {
                            tensor,
                            index: Vec::new(),
                            pad: None,
                        });
                    }
                    return Err(
                        id.err(format!("tensor `{name}` must be indexed, e.g. `{name}[i]`"))
                    );
                } else {
                    return Err(id.err(format!("unknown name `{name}`")));
                }
            }
            SynExpr::Index(_) => self.load(e, cx)?,
            SynExpr::Unary(u) => match u.op {
                UnOp::Neg(_) => Expr::Unary(UnaryOp::Neg, bx(self.expr(&u.expr, cx)?)),
                _ => return Err(u.op.err("unsupported operator: use + - * / and functions")),
            },
            SynExpr::Binary(b) => {
                let op = match b.op {
                    BinOp::Add(_) => BinaryOp::Add,
                    BinOp::Sub(_) => BinaryOp::Sub,
                    BinOp::Mul(_) => BinaryOp::Mul,
                    BinOp::Div(_) => BinaryOp::Div,
                    _ => return Err(b.op.err("unsupported operator: use + - * / and functions")),
                };
                Expr::Binary(
                    op,
                    bx(self.expr(&b.left, cx)?),
                    bx(self.expr(&b.right, cx)?),
                )
            }
            SynExpr::Cast(c) => {
                let want = self.dtype.as_ref().map(|(d, _)| *d).unwrap_or(DType::F32);
                match &*c.ty {
                    Type::Path(p) if p.path.is_ident(want.rust_name()) => {}
                    other => {
                        return Err(other.err(format!(
                            "mismatched element types: this operator computes in {want}"
                        )))
                    }
                }
                self.expr(&c.expr, cx)?
            }
            SynExpr::Call(call) => {
                let SynExpr::Path(f) = &*call.func else {
                    return Err(call
                        .func
                        .err(format!("unsupported call: {SUPPORTED_FUNCTIONS}")));
                };
                let fname = f
                    .path
                    .get_ident()
                    .map(|i| i.to_string())
                    .unwrap_or_default();
                let args: Vec<&SynExpr> = call.args.iter().collect();
                match (fname.as_str(), args.as_slice()) {
                    ("sum" | "max" | "min", [SynExpr::Closure(c)]) => {
                        let op = match fname.as_str() {
                            "sum" => ReduceOp::Sum,
                            "max" => ReduceOp::Max,
                            _ => ReduceOp::Min,
                        };
                        self.reduce(op, c, cx)?
                    }
                    ("compute", _) => {
                        return Err(call.func.err(
                            "compute(..) defines a stage: use it as a `let` initialiser or as the \
                             final expression",
                        ))
                    }
                    _ => self.function(&fname, &f.path, &args, cx)?,
                }
            }
            SynExpr::MethodCall(m) => {
                let mut args: Vec<&SynExpr> = vec![&m.receiver];
                args.extend(m.args.iter());
                if m.method == "pad" {
                    return Err(
                        m.err("`pad(value)` must be followed by indices: `x.pad(0.0)[i][j]`")
                    );
                }
                self.function(&m.method.to_string(), &m.method, &args, cx)?
            }
            other => {
                return Err(other.err(
                    "unsupported expression: an operator body uses tensor reads `a[i][k]`, \
                     literals, shape names, + - * /, functions and reductions",
                ))
            }
        })
    }

    fn function(
        &self,
        name: &str,
        at: &dyn Spanned,
        args: &[&SynExpr],
        cx: &mut StageCx,
    ) -> Result<Expr> {
        if let Some((_, op)) = UnaryOp::FUNCTIONS.iter().find(|(n, _)| *n == name) {
            let [a] = args else {
                return Err(syn::Error::new(
                    at.span(),
                    format!("`{name}` takes one argument"),
                ));
            };
            return Ok(Expr::Unary(*op, Box::new(self.expr(a, cx)?)));
        }
        let op = match name {
            "max" => BinaryOp::Max,
            "min" => BinaryOp::Min,
            _ => {
                return Err(syn::Error::new(
                    at.span(),
                    format!("unsupported function `{name}`: {SUPPORTED_FUNCTIONS}"),
                ))
            }
        };
        let [a, b] = args else {
            return Err(syn::Error::new(
                at.span(),
                format!(
                    "`{name}` takes two values, or one closure for a reduction: `{name}(|k| ..)`"
                ),
            ));
        };
        Ok(Expr::Binary(
            op,
            Box::new(self.expr(a, cx)?),
            Box::new(self.expr(b, cx)?),
        ))
    }

    fn reduce(&self, op: ReduceOp, c: &syn::ExprClosure, cx: &mut StageCx) -> Result<Expr> {
        if cx.in_reduce {
            return Err(c.err(
                "reductions cannot nest: compute the inner reduction in a `let` stage first",
            ));
        }
        if c.inputs.is_empty() {
            return Err(c.err("a reduction names at least one axis: `sum(|k| ..)`"));
        }
        let scope_len = cx.scope.len();
        let mut axes = Vec::new();
        for pat in &c.inputs {
            let (id, extent) = match pat {
                Pat::Ident(pi) => match &pi.subpat {
                    None => (&pi.ident, None),
                    Some((_, range)) => (&pi.ident, Some(self.reduce_range(range)?)),
                },
                other => {
                    return Err(other.err(
                        "expected a reduction axis: `k` (bound taken from where it indexes a \
                         tensor) or `k @ 0..K`",
                    ))
                }
            };
            axes.push((self.bind_axis(cx, id, extent)?, id));
        }
        cx.in_reduce = true;
        let body = self.expr(&c.body, cx);
        cx.in_reduce = false;
        let body = body?;
        // An axis without a declared range takes the size of a dimension it indexes directly.
        for &(a, id) in &axes {
            if cx.axes[a].1.is_none() {
                let mut found = None;
                body.visit(&mut |e| {
                    if let (Expr::Load { tensor, index, .. }, None) = (e, found) {
                        if let Some(d) = index.iter().position(|ix| ix.as_axis() == Some(a)) {
                            found = Some(self.tensor_dims(*tensor)[d]);
                        }
                    }
                });
                match found {
                    Some(ext) => cx.axes[a].1 = Some(ext),
                    None => {
                        return Err(id.err(format!(
                            "reduction axis `{id}` has no bound: it never indexes a tensor \
                             dimension directly; declare its range as `{id} @ 0..K`"
                        )))
                    }
                }
            }
        }
        cx.scope.truncate(scope_len);
        Ok(Expr::Reduce {
            op,
            axes: axes.into_iter().map(|(a, _)| a).collect(),
            body: Box::new(body),
        })
    }

    fn tensor_dims(&self, t: TensorRef) -> &[Extent] {
        match t {
            TensorRef::Input(i) => &self.inputs[i].dims,
            TensorRef::Stage(s) => &self.stages[s].dims,
        }
    }

    fn reduce_range(&self, pat: &Pat) -> Result<Extent> {
        let expected = "expected a range from 0: `k @ 0..K` or `r @ 0..3`";
        let Pat::Range(r) = pat else {
            return Err(pat.err(expected));
        };
        match r.start.as_deref() {
            Some(SynExpr::Lit(l)) if matches!(&l.lit, Lit::Int(i) if i.base10_digits() == "0") => {}
            _ => return Err(r.err(expected)),
        }
        let inclusive = matches!(r.limits, RangeLimits::Closed(_));
        match r.end.as_deref() {
            Some(SynExpr::Lit(l)) => match &l.lit {
                Lit::Int(i) => Ok(Extent::Const(
                    i.base10_parse::<i64>()? + i64::from(inclusive),
                )),
                other => Err(other.err(expected)),
            },
            Some(SynExpr::Path(p)) if !inclusive => {
                let id = p.path.get_ident().ok_or_else(|| p.err(expected))?;
                match self.shape_names.get(&id.to_string()) {
                    Some(v) => Ok(Extent::Var(*v)),
                    None => Err(id.err(format!("undeclared shape name `{id}`"))),
                }
            }
            _ => Err(r.err(expected)),
        }
    }

    /// `a[i][k]` or `x.pad(0.0)[c][h + r - 1][w + s - 1]`.
    fn load(&self, e: &SynExpr, cx: &mut StageCx) -> Result<Expr> {
        let mut indices = Vec::new();
        let mut base = e;
        while let SynExpr::Index(ix) = base {
            indices.push(&*ix.index);
            base = &ix.expr;
        }
        indices.reverse();
        let (name_expr, pad) = match base {
            SynExpr::MethodCall(m) if m.method == "pad" => {
                let [v] = m.args.iter().collect::<Vec<_>>()[..] else {
                    return Err(
                        m.err("`pad` takes the value read outside the tensor: `x.pad(0.0)`")
                    );
                };
                (&*m.receiver, Some(self.const_value(v)?))
            }
            other => (other, None),
        };
        let SynExpr::Path(p) = name_expr else {
            return Err(name_expr.err("only tensors can be indexed"));
        };
        let Some(id) = p.path.get_ident() else {
            return Err(p.err("expected a tensor name"));
        };
        let name = id.to_string();
        let Some(&tensor) = self.tensors.get(&name) else {
            return Err(id.err(format!(
                "unknown tensor `{name}`: tensors are the parameters and earlier `let` stages"
            )));
        };
        let rank = self.tensor_dims(tensor).len();
        if rank == 0 {
            return Err(e.err(format!(
                "`{name}` is a scalar (a rank-0 tensor): read it by name, `{name}`, with no index"
            )));
        }
        if indices.len() != rank {
            return Err(e.err(format!(
                "wrong rank: `{name}` has {rank} dimension(s) but is indexed with {}",
                indices.len()
            )));
        }
        let index = indices
            .iter()
            .map(|ix| self.index(ix, cx))
            .collect::<Result<_>>()?;
        Ok(Expr::Load { tensor, index, pad })
    }

    fn index(&self, e: &SynExpr, cx: &StageCx) -> Result<Affine> {
        let overflow = |e: &SynExpr| e.err("index arithmetic overflows");
        Ok(match e {
            SynExpr::Lit(l) => match &l.lit {
                Lit::Int(i) => Affine::constant(i.base10_parse()?),
                other => return Err(other.err("an index is an integer")),
            },
            SynExpr::Paren(p) => self.index(&p.expr, cx)?,
            SynExpr::Group(g) => self.index(&g.expr, cx)?,
            SynExpr::Path(p) => {
                let Some(id) = p.path.get_ident() else {
                    return Err(p.err("expected an index variable"));
                };
                let name = id.to_string();
                match cx.lookup(&name) {
                    Some(a) => Affine::axis(a),
                    None if self.shape_names.contains_key(&name) => {
                        return Err(id.err(format!(
                            "shape `{name}` in an index: indices are affine in the index \
                             variables with integer literal coefficients, e.g. `2 * i + r - 1`"
                        )))
                    }
                    None => {
                        return Err(id.err(format!(
                            "unbound index variable `{name}`: it is not a parameter of the \
                             enclosing compute or reduction closure"
                        )))
                    }
                }
            }
            SynExpr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => self
                .index(&u.expr, cx)?
                .scale(-1)
                .ok_or_else(|| overflow(e))?,
            SynExpr::Binary(b) => {
                let (l, r) = (self.index(&b.left, cx)?, self.index(&b.right, cx)?);
                match b.op {
                    BinOp::Add(_) => l.add(&r, 1),
                    BinOp::Sub(_) => l.add(&r, -1),
                    BinOp::Mul(_) if l.terms.is_empty() => r.scale(l.offset),
                    BinOp::Mul(_) if r.terms.is_empty() => l.scale(r.offset),
                    _ => {
                        return Err(b.err(
                            "non-affine index: indices are sums of index variables times \
                             integer literals, e.g. `2 * i + r - 1`",
                        ))
                    }
                }
                .ok_or_else(|| overflow(e))?
            }
            other => {
                return Err(other.err(
                    "unsupported index expression: indices are affine, e.g. `i`, `2 * i + r - 1`",
                ))
            }
        })
    }

    /// A literal or `f32::INFINITY`-style constant (with an optional minus).
    fn const_value(&self, e: &SynExpr) -> Result<f64> {
        match e {
            SynExpr::Lit(l) => self.literal(&l.lit),
            SynExpr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => Ok(-self.const_value(&u.expr)?),
            SynExpr::Paren(p) => self.const_value(&p.expr),
            SynExpr::Path(p) => match self.float_const(p)? {
                Some(v) => Ok(v),
                None => Err(p.err("expected a constant, e.g. `0.0` or `f32::NEG_INFINITY`")),
            },
            other => Err(other.err("expected a constant, e.g. `0.0` or `f32::NEG_INFINITY`")),
        }
    }

    fn literal(&self, lit: &Lit) -> Result<f64> {
        let want = self.dtype.as_ref().map(|(d, _)| *d).unwrap_or(DType::F32);
        let (value, suffix) = match lit {
            Lit::Float(f) => (f.base10_parse::<f64>()?, f.suffix()),
            Lit::Int(i) => (i.base10_parse::<f64>()?, i.suffix()),
            other => return Err(other.err("expected a number")),
        };
        if !suffix.is_empty() && suffix != want.rust_name() {
            return Err(lit.err(format!(
                "mismatched element types: literal of type {suffix} in an operator on {want}"
            )));
        }
        Ok(value)
    }

    /// `f32::INFINITY`, `f64::NEG_INFINITY`, `f32::MAX`, `f32::MIN`.
    fn float_const(&self, p: &syn::ExprPath) -> Result<Option<f64>> {
        let segs: Vec<String> = p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        let [ty, name] = segs.as_slice() else {
            return Ok(None);
        };
        let want = self.dtype.as_ref().map(|(d, _)| *d).unwrap_or(DType::F32);
        let dtype = match ty.as_str() {
            "f32" => DType::F32,
            "f64" => DType::F64,
            _ => return Ok(None),
        };
        if dtype != want {
            return Err(p.err(format!(
                "mismatched element types: {ty} constant in an operator on {want}"
            )));
        }
        let v = match (dtype, name.as_str()) {
            (_, "INFINITY") => f64::INFINITY,
            (_, "NEG_INFINITY") => f64::NEG_INFINITY,
            (DType::F32, "MAX") => f32::MAX as f64,
            (DType::F32, "MIN") => f32::MIN as f64,
            (DType::F64, "MAX") => f64::MAX,
            (DType::F64, "MIN") => f64::MIN,
            _ => return Err(p.err("supported constants are INFINITY, NEG_INFINITY, MAX and MIN")),
        };
        Ok(Some(v))
    }
}

#[derive(Default)]
struct StageCx {
    /// Every axis of the stage: spatial first, then reduction axes as met.
    axes: Vec<(String, Option<Extent>)>,
    /// Index variables visible here.
    scope: Vec<(String, AxisId)>,
    in_reduce: bool,
}

impl StageCx {
    fn lookup(&self, name: &str) -> Option<AxisId> {
        self.scope
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, a)| *a)
    }
}

fn specializations(
    op: &Operator,
    names: &BTreeMap<String, ShapeVarId>,
    lists: &[(Span, Vec<(Ident, SynExpr)>)],
) -> Result<Vec<Specialization>> {
    let free: Vec<&str> = op
        .input_shape_vars()
        .map(|(_, v)| v.name.as_str())
        .collect();
    let mut out: Vec<Specialization> = Vec::new();
    for (span, values) in lists {
        let mut given: Vec<(ShapeVarId, i64)> = Vec::new();
        let mut ranges: Vec<ShapeRange> = Vec::new();
        for (name, value) in values {
            let v = match names.get(&name.to_string()) {
                Some(v) => *v,
                None => {
                    return Err(name.err(format!(
                    "undeclared shape name `{name}` in specialize: the operator's shapes are {}",
                    free.join(", ")
                )))
                }
            };
            if let ShapeVarKind::Derived(e) = &op.shape_vars[v].kind {
                return Err(name.err(format!(
                    "`{name}` is derived (`{name} = {}`) and cannot be specialised; \
                     specialise {}",
                    e.display(op),
                    free.join(", ")
                )));
            }
            if given.iter().any(|(g, _)| *g == v) {
                return Err(name.err(format!("`{name}` is specialised twice")));
            }
            let (lo, hi) = size_or_range(name, value)?;
            if lo == 0 {
                return Err(value.err(format!(
                    "`{name} = 0`: a specialised size must be at least 1 (a call with an empty \
                     tensor runs the generic kernel)"
                )));
            }
            if hi < lo {
                return Err(value.err(format!(
                    "`{name}`: the range {lo}..={hi} is empty (a bucket's range is `LO..=HI` \
                     with LO <= HI)"
                )));
            }
            if lo < hi {
                ranges.push(ShapeRange { var: v, lo, hi });
            }
            // A bucket's anchor is the top of each range: its space then holds
            // every tile a call of the range can use.
            given.push((v, hi));
        }
        let missing: Vec<&str> = op
            .input_shape_vars()
            .filter(|(v, _)| !given.iter().any(|(g, _)| g == v))
            .map(|(_, s)| s.name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(syn::Error::new(
                *span,
                format!(
                    "specialize must give every input shape: missing {}",
                    missing.join(", ")
                ),
            ));
        }
        let what = if ranges.is_empty() {
            "this specialisation"
        } else {
            "this bucket's anchor"
        };
        let values = check_shapes(op, *span, &given, what)?;
        // A bucket's derived shapes and tensor sizes must hold over its whole
        // range: checked at every corner (derived shapes are affine in the inputs).
        for corner in 0..(1u32 << ranges.len()) {
            let mut at = given.clone();
            for (i, r) in ranges.iter().enumerate() {
                let x = if corner & (1 << i) == 0 { r.lo } else { r.hi };
                at.iter_mut().find(|(g, _)| *g == r.var).expect("given").1 = x;
            }
            let shown: Vec<String> = at
                .iter()
                .filter(|(g, _)| ranges.iter().any(|r| r.var == *g))
                .map(|(g, x)| format!("{} = {x}", op.shape_vars[*g].name))
                .collect();
            check_sizes(
                op,
                *span,
                &at,
                &format!("at {} this bucket", shown.join(", ")),
            )?;
        }
        let spec = Specialization {
            values,
            bucket: (!ranges.is_empty()).then_some(Bucket { ranges }),
        };
        if out.contains(&spec) {
            return Err(syn::Error::new(*span, "duplicate specialisation"));
        }
        // An exact shape inside a bucket is fine (the exact kernel wins); two
        // buckets must not share a shape.
        let buckets = out.iter().filter(|s| s.bucket.is_some());
        if let Some(other) = buckets
            .filter(|_| spec.bucket.is_some())
            .find(|s| overlap(op, s, &spec))
        {
            return Err(syn::Error::new(
                *span,
                format!(
                    "this bucket overlaps the bucket `{}`: a call must find one kernel",
                    bucket_text(op, other)
                ),
            ));
        }
        out.push(spec);
    }
    Ok(out)
}

/// `64` or `LO..=HI` / `LO..HI` (integer literals) as an inclusive range.
fn size_or_range(name: &Ident, value: &SynExpr) -> Result<(i64, i64)> {
    let int = |e: &SynExpr| -> Result<i64> {
        match e {
            SynExpr::Lit(syn::ExprLit {
                lit: Lit::Int(i), ..
            }) => i.base10_parse::<i64>(),
            _ => Err(e.err(format!(
                "non-constant specialisation: `{name}` must be an integer literal or a range \
                 `LO..=HI` of them"
            ))),
        }
    };
    match value {
        SynExpr::Range(r) => {
            let (Some(lo), Some(hi)) = (&r.start, &r.end) else {
                return Err(value.err(format!(
                    "`{name}`: a bucket's range needs both bounds (`LO..=HI`)"
                )));
            };
            let (lo, hi) = (int(lo)?, int(hi)?);
            match r.limits {
                RangeLimits::Closed(_) => Ok((lo, hi)),
                RangeLimits::HalfOpen(_) => Ok((lo, hi - 1)),
            }
        }
        _ => int(value).map(|x| (x, x)),
    }
}

/// Whether two specialisations share a shape.
fn overlap(op: &Operator, a: &Specialization, b: &Specialization) -> bool {
    op.input_shape_vars().all(|(v, _)| {
        let (a, b) = (a.range(v), b.range(v));
        a.0 <= b.1 && b.0 <= a.1
    })
}

/// `M = 1..=4096, N = 1024` for messages.
fn bucket_text(op: &Operator, s: &Specialization) -> String {
    op.input_shape_vars()
        .map(|(v, var)| format!("{} = {}", var.name, s.size_text(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The values of every shape variable at the input sizes `given`, checked
/// as [`check_sizes`] does, and no read out of bounds (`what` names them in
/// errors).
fn check_shapes(
    op: &Operator,
    span: Span,
    given: &[(ShapeVarId, i64)],
    what: &str,
) -> Result<Vec<i64>> {
    let values = check_sizes(op, span, given, what)?;
    if let Some(t) = op.read_too_large(&values) {
        return Err(syn::Error::new(
            span,
            format!(
                "at {what} a read of `{}` spans more elements than a kernel can \
                 index (its index range's byte size must fit in an i64)",
                op.tensor_name(t)
            ),
        ));
    }
    if let Some((b, lo, hi, size)) = op.read_out_of_bounds(&values) {
        return Err(syn::Error::new(
            span,
            format!(
                "at {what} `{}` dimension {} is read at {lo}..={hi}, but has \
                 size {size}: every call would be refused (pad the read with \
                 `.pad(value)`, or fix the shapes)",
                op.tensor_name(b.tensor),
                b.dim
            ),
        ));
    }
    Ok(values)
}

/// The values of every shape variable at the input sizes `given`: derived
/// shapes positive, every tensor's byte count an i64.
fn check_sizes(
    op: &Operator,
    span: Span,
    given: &[(ShapeVarId, i64)],
    what: &str,
) -> Result<Vec<i64>> {
    let values = op.resolve_shapes(given).ok_or_else(|| {
        syn::Error::new(
            span,
            format!("{what} makes a derived shape negative or overflow"),
        )
    })?;
    if let Some(v) = (0..values.len()).find(|&v| values[v] == 0) {
        return Err(syn::Error::new(
            span,
            format!(
                "{what} makes the derived shape `{}` zero",
                op.shape_vars[v].name
            ),
        ));
    }
    for t in op.tensors() {
        if op.tensor_bytes(t, &values).is_none() {
            let dims: Vec<String> = op
                .tensor_dims(t)
                .iter()
                .map(|d| d.value(&values).to_string())
                .collect();
            return Err(syn::Error::new(
                span,
                format!(
                    "{what} gives `{}` {} elements ({}): more than a kernel \
                     can index (its byte count must fit in an i64)",
                    op.tensor_name(t),
                    dims.join("·"),
                    op.dtype
                ),
            ));
        }
    }
    Ok(values)
}

/// An operator from source text, for tests.
#[cfg(test)]
pub(crate) fn test_parse(attr: &str, item: &str) -> Operator {
    let attr: TokenStream = attr.parse().unwrap();
    let item = syn::parse_str::<ItemFn>(item).unwrap();
    parse_operator(attr, &item).unwrap()
}
