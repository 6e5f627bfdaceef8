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
