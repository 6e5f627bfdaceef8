use super::*;

#[test]
fn parses_specs() {
    assert_eq!("64".parse::<SizeDist>().unwrap(), SizeDist::Fixed(64));
    assert_eq!("fixed:8".parse::<SizeDist>().unwrap(), SizeDist::Fixed(8));
    let u: SizeDist = "uniform:4,240".parse().unwrap();
    assert_eq!(u, SizeDist::Uniform { lo: 4, hi: 240 });
    assert_eq!(u.to_string().parse::<SizeDist>().unwrap(), u);
    for bad in [
        "",
        "x",
        "uniform:5",
        "uniform:9,3",
        "normal:1,2",
        "fixed:-1",
    ] {
        assert!(bad.parse::<SizeDist>().is_err(), "{bad}");
    }
    assert_eq!(
        "uniform".parse::<Popularity>().unwrap(),
        Popularity::Uniform
    );
    assert_eq!(
        "zipf:0.99".parse::<Popularity>().unwrap(),
        Popularity::Zipf(0.99)
    );
    for bad in ["zipf", "zipf:-1", "zipf:nan", "pareto:1"] {
        assert!(bad.parse::<Popularity>().is_err(), "{bad}");
    }
}

#[test]
fn keys_have_their_size_and_are_distinct() {
    let w = KvWorkload::default();
    let mut k = Vec::new();
    w.write_key(42, &mut k);
    assert_eq!(k.len(), 64);
    assert!(k.starts_with(b"key:0000") && k.ends_with(b"0042"));
    let small = KvWorkload {
        key_size: SizeDist::Fixed(4),
        ..KvWorkload::default()
    };
    small.validate().unwrap();
    k.clear();
    small.write_key(42, &mut k);
    assert_eq!(k, b"0042");
    let too_small = KvWorkload {
        key_size: SizeDist::Fixed(3),
        ..KvWorkload::default()
    };
    assert!(too_small.validate().is_err());
    let var = KvWorkload {
        key_size: "uniform:4,240".parse().unwrap(),
        items: 1000,
        ..KvWorkload::default()
    };
    let mut seen = std::collections::HashSet::new();
    for item in 0..1000 {
        let mut k = Vec::new();
        var.write_key(item, &mut k);
        assert_eq!(k.len(), var.key_size_of(item));
        assert!((4..=240).contains(&k.len()));
        assert!(seen.insert(k));
    }
}

fn draws(w: KvWorkload, seed: u64, n: usize) -> Vec<KvOp> {
    let mut g = WorkloadGen::new(Arc::new(w), seed).unwrap();
    (0..n).map(|_| g.next_op()).collect()
}

#[test]
fn get_ratio_and_value_sizes_match_the_spec() {
    let n = 100_000;
    let w = KvWorkload {
        value_size: "uniform:4,240".parse().unwrap(),
        ..KvWorkload::default()
    };
    let ops = draws(w, 7, n);
    let sets: Vec<usize> = ops
        .iter()
        .filter_map(|o| match o {
            KvOp::Set { value_len, .. } => Some(*value_len),
            _ => None,
        })
        .collect();
    let get_frac = 1.0 - sets.len() as f64 / n as f64;
    // sd of the fraction: sqrt(0.9 * 0.1 / n) = 0.00095; 5 sd.
    assert!((get_frac - 0.9).abs() < 0.0048, "{get_frac}");
    // Uniform 4..=240: mean 122, sd sqrt((237^2 - 1) / 12) = 68.4; ~10k sets, 5 sd of the mean.
    let mean = sets.iter().sum::<usize>() as f64 / sets.len() as f64;
    let tol = 5.0 * 68.4 / (sets.len() as f64).sqrt();
    assert!((mean - 122.0).abs() < tol, "{mean}");
    assert!(sets.iter().all(|v| (4..=240).contains(v)));
    // Reproducible per seed, different across seeds.
    assert_eq!(
        draws(KvWorkload::default(), 3, 100),
        draws(KvWorkload::default(), 3, 100)
    );
    assert_ne!(
        draws(KvWorkload::default(), 3, 100),
        draws(KvWorkload::default(), 4, 100)
    );
}

fn item_freqs(pop: Popularity, items: u64, n: usize) -> Vec<f64> {
    let w = KvWorkload {
        items,
        popularity: pop,
        ..KvWorkload::default()
    };
    let mut counts = vec![0usize; items as usize];
    for op in draws(w, 11, n) {
        let (KvOp::Get { item } | KvOp::Set { item, .. }) = op;
        counts[item as usize] += 1;
    }
    counts.iter().map(|&c| c as f64 / n as f64).collect()
}

#[test]
fn popularity_matches_theory() {
    let n = 100_000;
    // Zipf s=1 over 10 items: P(rank k) = (1/k) / H_10, H_10 = 2.928968.
    let f = item_freqs(Popularity::Zipf(1.0), 10, n);
    for (k, fk) in f.iter().enumerate() {
        let p = 1.0 / (k as f64 + 1.0) / 2.928_968;
        let sd = (p * (1.0 - p) / n as f64).sqrt();
        assert!((fk - p).abs() < 5.0 * sd, "rank {}: {fk} vs {p}", k + 1);
    }
    let f = item_freqs(Popularity::Uniform, 10, n);
    let sd = (0.1f64 * 0.9 / n as f64).sqrt();
    assert!(f.iter().all(|fk| (fk - 0.1).abs() < 5.0 * sd), "{f:?}");
}

#[test]
fn paths_follow_popularity() {
    let w = HttpWorkload {
        paths: vec!["/a".into(), "/b".into()],
        popularity: Popularity::Zipf(1.0),
    };
    let mut g = PathGen::new(&w, 5).unwrap();
    let n = 30_000;
    let a = (0..n).filter(|_| g.next_path() == "/a").count() as f64 / n as f64;
    // P(/a) = 1 / (1 + 1/2) = 2/3; sd = sqrt(2/9 / n) = 0.0027.
    assert!((a - 2.0 / 3.0).abs() < 0.0136, "{a}");
    assert!(PathGen::new(
        &HttpWorkload {
            paths: vec![],
            popularity: Popularity::Uniform
        },
        1
    )
    .is_err());
    assert!(PathGen::new(
        &HttpWorkload {
            paths: vec!["x".into()],
            popularity: Popularity::Uniform
        },
        1
    )
    .is_err());
}

/// The exact quantile of `d` at `p`: the smallest k with P(size ≤ k) ≥ p.
fn exact_quantile(d: SizeDist, p: f64) -> usize {
    let (lo, hi) = d.bounds();
    let (mut a, mut b) = (lo, hi);
    while a < b {
        let m = a + (b - a) / 2;
        if d.cdf(m) >= p {
            b = m;
        } else {
            a = m + 1;
        }
    }
    a
}

/// Checks drawn sizes against `d`'s exact quantiles and CDF. The empirical p-quantile `got`
/// of `n` draws is accepted when it is a likely one: the exact CDF reaches p − 5 sd at `got`
/// and has not passed p + 5 sd one byte below it (sd = √(p(1 − p)/n), the sd of the
/// empirical CDF at the quantile). Where the density is high that pins `got` to the exact
/// quantile; in the long value tail it allows the few bytes that n draws do vary by.
fn assert_sizes_follow(d: SizeDist, mut sizes: Vec<usize>) {
    let n = sizes.len();
    sizes.sort_unstable();
    let (lo, hi) = d.bounds();
    assert!(sizes.iter().all(|s| (lo..=hi).contains(s)));
    for p in [0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999] {
        let sd = (p * (1.0 - p) / n as f64).sqrt();
        let exact = exact_quantile(d, p);
        let got = sizes[((p * n as f64).ceil() as usize).max(1) - 1];
        let reached = d.cdf(got) >= p - 5.0 * sd;
        let not_past = got == lo || d.cdf(got - 1) <= p + 5.0 * sd;
        assert!(
            reached && not_past,
            "{d} p{p}: drawn {got}, exact {exact} (F({got}) = {})",
            d.cdf(got)
        );
    }
    for k in [q(&d, 0.2), q(&d, 0.5), q(&d, 0.8), q(&d, 0.99)] {
        let f = d.cdf(k);
        let got = sizes.partition_point(|&s| s <= k) as f64 / n as f64;
        let sd = (f * (1.0 - f) / n as f64).sqrt().max(1.0 / n as f64);
        assert!(
            (got - f).abs() < 5.0 * sd,
            "{d} F({k}): drawn {got}, exact {f}"
        );
    }
}

fn q(d: &SizeDist, p: f64) -> usize {
    exact_quantile(*d, p)
}

#[test]
fn etc_sizes_follow_the_published_distributions() {
    let etc = KvWorkload {
        key_size: "etc".parse().unwrap(),
        value_size: "etc".parse().unwrap(),
        items: 200_000,
        get_ratio: 0.0,
        ..KvWorkload::default()
    };
    etc.validate().unwrap();
    let keys = SizeDist::Etc(EtcSize::Key);
    let values = SizeDist::Etc(EtcSize::Value);
    // Hand-computed from the fits: the GEV median is 30.7984 + 8.20449·((ln 2)^-0.078688 − 1)
    // / 0.078688 = 33.85, so 34 bytes; the value median falls in the Pareto tail at
    // (0.5 − 0.44155)/0.55845 = 0.10466 of it: 15 + 214.476·(0.89534^-0.348238 − 1)/0.348238
    // = 39.2, so 39 bytes; sizes 0..=14 hold 0.44155 of the mass.
    assert_eq!(exact_quantile(keys, 0.5), 34);
    assert_eq!(exact_quantile(values, 0.5), 39);
    assert!((values.cdf(14) - 0.44155).abs() < 1e-12);
    assert!((values.cdf(2) - (0.00536 + 0.00047 + 0.17820)).abs() < 1e-12);
    assert_eq!(values.cdf(VALUE_MAX_FOR_TEST), 1.0);

    // Keys: one size per item, a pure function of the item number.
    let key_sizes: Vec<usize> = (0..etc.items).map(|i| etc.key_size_of(i)).collect();
    assert_eq!(etc.key_size_of(77), key_sizes[77]);
    let mut k = Vec::new();
    etc.write_key(77, &mut k);
    assert_eq!(k.len(), key_sizes[77]);
    assert_sizes_follow(keys, key_sizes);

    // Values: every op a set (get ratio 0), drawn by the connection's stream.
    let value_sizes: Vec<usize> = draws(etc.clone(), 21, 1_000_000)
        .into_iter()
        .map(|o| match o {
            KvOp::Set { value_len, .. } => value_len,
            KvOp::Get { .. } => usize::MAX,
        })
        .collect();
    assert_sizes_follow(values, value_sizes);
    // Reproducible from the seed.
    assert_eq!(draws(etc.clone(), 5, 50), draws(etc, 5, 50));
    assert_eq!("etc".parse::<SizeDist>().unwrap().to_string(), "etc");
}

const VALUE_MAX_FOR_TEST: usize = crate::etc::VALUE_MAX;

#[test]
fn a_grpc_workload_prints_its_message_as_length_and_hex_prefix() {
    let w = GrpcWorkload {
        path: "/p.S/M".into(),
        message: vec![0xab; 40],
        metadata: vec![("x-team".into(), "a".into())],
    };
    let shown = format!("{w:?}");
    assert_eq!(
        shown,
        format!(
            "GrpcWorkload {{ path: \"/p.S/M\", message: 40 bytes {}…, metadata: [(\"x-team\", \"a\")] }}",
            "ab".repeat(32)
        )
    );
}
