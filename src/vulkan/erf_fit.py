#!/usr/bin/env python3
"""erf_fit.py: the coefficients of erf_acc (src/vulkan/kernels/elementwise.comp), and its error
measured in emulated float arithmetic. Python's standard library only; run it to regenerate.

GLSL has no erf. erf_acc takes two ranges, each fitted by Chebyshev interpolation (within a
small factor of the minimax polynomial of the same degree) against math.erf / math.erfc in double:
  |x| < 0.9:       erf(x) = x + x * P(x^2), P of degree 6 fitted to erf(sqrt u) / sqrt u - 1: the
                   exact term x carries most of the value, so P's rounding counts ~8x less
  0.9 <= |x| <= 4: erf(x) = 1 - exp(-x^2) * Q(x - 2.45), Q of degree 12 fitted to erfcx(x) =
                   erfc(x) exp(x^2), smooth on the range; past 4, erfc(x) < 2e-8 is below half an
                   ulp of 1, and x is clamped to 4.
Every operation of the evaluation is rounded to float here, exp taken exact: the driver's exp adds
its own error (test_vulkan's gelu_matches_the_cpu measures the whole on the device against glibc's
erff). Abramowitz-Stegun 7.1.26 measured the same way is off by 4.6e-7 (its 1.5e-7 in exact
arithmetic, and 1 - t poly exp(-x^2) cancelling near 0), and fails that test."""
import math
import struct

TH, CB, DEG_P, DEG_Q = 0.9, 2.45, 6, 12


def f32(x):
    return struct.unpack('f', struct.pack('f', x))[0]


def cheb_fit(f, a, b, deg):
    """Coefficients of the degree-deg interpolant of f at the Chebyshev nodes of [a, b], as
    powers of (x - (a + b) / 2)."""
    n = deg + 1
    nodes = [math.cos(math.pi * (k + 0.5) / n) for k in range(n)]
    fx = [f((a + b) / 2 + (b - a) / 2 * t) for t in nodes]
    c = [2.0 / n * sum(fx[k] * math.cos(math.pi * j * (k + 0.5) / n) for k in range(n)) for j in range(n)]
    c[0] /= 2
    T = [[1], [0, 1]]
    for j in range(2, n):
        nxt = [0] * (j + 1)
        for i, v in enumerate(T[-1]):
            nxt[i + 1] += 2 * v
        for i, v in enumerate(T[-2]):
            nxt[i] -= v
        T.append(nxt)
    mono = [0.0] * n
    for j in range(n):
        for i, v in enumerate(T[j]):
            mono[i] += c[j] * v
    half = (b - a) / 2
    return [m / half ** i for i, m in enumerate(mono)]


def horner(cs, s):
    r = cs[-1]
    for c in reversed(cs[:-1]):
        r = f32(f32(r * s) + c)
    return r


def erf_acc(x, P, Q):
    a = abs(x)
    if a < TH:
        r = f32(a + f32(a * horner(P, f32(a * a))))
    else:
        a = min(a, 4.0)
        r = f32(1.0 - f32(f32(math.exp(f32(-f32(a * a)))) * horner(Q, f32(a - CB))))
    return math.copysign(r, x)


def main():
    # P in powers of u = x^2 (fitted about the middle of [0, TH^2], expanded about 0)
    pc = cheb_fit(lambda u: math.erf(math.sqrt(u)) / math.sqrt(u) - 1 if u > 0 else 2 / math.sqrt(math.pi) - 1,
                  0.0, TH * TH, DEG_P)
    mid = TH * TH / 2
    P = [0.0] * len(pc)
    for i, a in enumerate(pc):
        for k in range(i + 1):
            P[k] += a * math.comb(i, k) * (-mid) ** (i - k)
    Q = cheb_fit(lambda x: math.erfc(x) * math.exp(x * x), TH, 4.0, DEG_Q)
    P, Q = [f32(c) for c in P], [f32(c) for c in Q]
    print('P:', ', '.join('%.9e' % c for c in P))
    print('Q:', ', '.join('%.9e' % c for c in Q))
    worst, at = 0.0, 0.0
    for k in range(80001):   # every 1e-4 over [0, 8]; erf is odd
        x = f32(k * 1e-4)
        e = abs(erf_acc(x, P, Q) - math.erf(x))
        if e > worst:
            worst, at = e, x
    print('max |erf_acc - erf| = %.3g at x = %.6g' % (worst, at))


if __name__ == '__main__':
    main()
