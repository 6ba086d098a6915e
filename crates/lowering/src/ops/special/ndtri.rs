//! ndtri, the inverse of the standard normal CDF (Cephes).
// Published coefficient tables (Cephes) are kept digit for digit.
#![allow(clippy::excessive_precision)]
use stablehlo::CompareDir;

use super::{unary, R};
use crate::args::Args;
use crate::ctx::Lower;

/// The inverse of the standard normal CDF (Cephes ndtri).
pub(crate) fn ndtri(lx: &mut Lower, args: &Args) -> R {
    const P0: [f64; 5] = [
        -5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1,
        1.39312609387279679503E1, -1.23916583867381258016E0,
    ];
    const Q0: [f64; 9] = [
        1.0, 1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1,
        -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1,
        1.59056225126211695515E1, -1.18331621121330003142E0,
    ];
    const P1: [f64; 9] = [
        4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1,
        4.40805073893200834700E1, 1.46849561928858024014E1, 2.18663306850790267539E0,
        -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4,
    ];
    const Q1: [f64; 9] = [
        1.0, 1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1,
        1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1,
        -3.80806407691578277194E-2, -9.33259480895457427372E-4,
    ];
    const P2: [f64; 9] = [
        3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0,
        1.33303460815807542389E0, 2.01485389549179081538E-1, 1.23716634817820021358E-2,
        3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9,
    ];
    const Q2: [f64; 9] = [
        1.0, 6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0,
        2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4,
        2.89247864745380683936E-6, 6.79019408009981274425E-9,
    ];
    const E2: f64 = 0.135_335_283_236_612_7; // exp(-2)
    unary(lx, args, 0, |e, y0| {
        let hi = e.cmpc(y0, 1.0 - E2, CompareDir::Gt)?;
        let r = e.rsubc(1.0, y0)?;
        let y = e.sel(hi, r, y0)?;
        // Middle: |y - 0.5| <= 3/8.
        let mid = e.cmpc(y, E2, CompareDir::Gt)?;
        let ym = e.addc(y, -0.5)?;
        let y2 = e.mul(ym, ym)?;
        let p = e.polevl(y2, &P0)?;
        let q = e.polevl(y2, &Q0)?;
        let t = e.mul(y2, p)?;
        let t = e.div(t, q)?;
        let t = e.mul(ym, t)?;
        let xm = e.add(ym, t)?;
        let xm = e.mulc(xm, 2.506_628_274_631_000_7)?;
        // Tails: x = sqrt(-2 log y).
        let one = e.c(y, 1.0)?;
        let ys = e.sel(mid, one, y)?; // keep the unused branch finite
        let l = e.lx.b.log(ys)?;
        let l = e.mulc(l, -2.0)?;
        let x = e.lx.b.sqrt(l)?;
        let lx_ = e.lx.b.log(x)?;
        let q0 = e.div(lx_, x)?;
        let x0 = e.sub(x, q0)?;
        let z = e.rdivc(1.0, x)?;
        let p1 = e.polevl(z, &P1)?;
        let q1 = e.polevl(z, &Q1)?;
        let r1 = e.div(p1, q1)?;
        let p2 = e.polevl(z, &P2)?;
        let q2 = e.polevl(z, &Q2)?;
        let r2 = e.div(p2, q2)?;
        let lt8 = e.cmpc(x, 8.0, CompareDir::Lt)?;
        let r = e.sel(lt8, r1, r2)?;
        let x1 = e.mul(z, r)?;
        let xt = e.sub(x0, x1)?;
        let nxt = e.lx.b.neg(xt)?;
        let xt = e.sel(hi, xt, nxt)?;
        let res = e.sel(mid, xm, xt)?;
        let lo = e.cmpc(y0, 0.0, CompareDir::Lt)?;
        let gt = e.cmpc(y0, 1.0, CompareDir::Gt)?;
        let out = e.or(lo, gt)?;
        let res = e.selc(out, f64::NAN, res)?;
        let z0 = e.cmpc(y0, 0.0, CompareDir::Eq)?;
        let res = e.selc(z0, f64::NEG_INFINITY, res)?;
        let o1 = e.cmpc(y0, 1.0, CompareDir::Eq)?;
        e.selc(o1, f64::INFINITY, res)
    })
}
