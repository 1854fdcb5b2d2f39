// The order statistics the benchmarks report, one definition for all of them: the nearest rank below, so a
// p99 of 100 samples is the 100th smallest and a figure is always one that was measured.

/** The `p`th percentile (0–100) of ascending `sorted`; NaN when there is none. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** The median of `values` in any order (the upper one of an even count). */
export const median = (values: readonly number[]): number =>
  percentile(
    [...values].sort((a, b) => a - b),
    50,
  );
