// Median and range of repeated measurements; every figure in the bench table is one of these.
export interface Summary {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  readonly runs: number;
}

export function median(samples: readonly number[]): number {
  if (samples.length === 0) throw new RangeError("median of no samples");
  const sorted = [...samples].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

export function summarize(samples: readonly number[]): Summary {
  return { median: median(samples), min: Math.min(...samples), max: Math.max(...samples), runs: samples.length };
}

/** Ratio of the medians, so it agrees with the figures printed beside it. */
export function ratioOfMedians(a: readonly number[], b: readonly number[]): number {
  return median(a) / median(b);
}

/** Monotonic clock in nanoseconds, as a number (exact to well beyond any bench duration). */
export function nowNs(): number {
  return Number(process.hrtime.bigint());
}

/**
 * Runs each variant once per round, round after round, so every variant sees the same machine state;
 * the first `warmup` rounds are thrown away. Returns the kept samples per variant, index-aligned.
 */
export async function rounds<K extends string>(
  variants: Readonly<Record<K, () => Promise<number>>>,
  options: { readonly runs: number; readonly warmup: number },
): Promise<Record<K, number[]>> {
  const names = Object.keys(variants) as K[];
  const samples = Object.fromEntries(names.map((name) => [name, [] as number[]])) as Record<K, number[]>;
  for (let round = 0; round < options.warmup + options.runs; round += 1) {
    for (const name of names) {
      const value = await variants[name]();
      if (round >= options.warmup) samples[name].push(value);
    }
  }
  return samples;
}

/**
 * CPU time this process has used (user + system, every thread), in nanoseconds; microsecond resolution. On a
 * machine others are loading, it counts the work done and not the time spent waiting for a core.
 */
export function cpuNs(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) * 1e3;
}
