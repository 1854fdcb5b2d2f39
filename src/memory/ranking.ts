/**
 * Ranking steps of memory search that run on the candidates the database returns, the same for SQLite
 * and Postgres: spreading a turn's score to the turns around it, and reciprocal-rank fusion.
 */

/** Address of an entry within its session key. */
export interface TurnRef {
  sessionKey: string;
  memoryId: number;
}

export interface ScoredTurn extends TurnRef {
  score: number;
}

/**
 * Neighbour smoothing: every candidate turn passes `weights[d - 1]` of its score to the turns `d`
 * MemoryIDs before and after it (same session key), and keeps its own score. A conversation answers in the
 * turns next to where a topic is named, so a turn without the query's words ("Yes, every Sunday!") is
 * found through the question before it. Returns every turn that received a score, best first (ties: the
 * older key/id first, so results are deterministic).
 */
export function spreadToNeighbours(
  candidates: ReadonlyArray<ScoredTurn & { spreads: boolean }>,
  weights: ReadonlyArray<number>,
): ScoredTurn[] {
  const scores = new Map<string, ScoredTurn>();
  const add = (sessionKey: string, memoryId: number, score: number) => {
    if (memoryId < 1 || score <= 0) return;
    const key = `${sessionKey}#${memoryId}`;
    const found = scores.get(key);
    if (found) found.score += score;
    else scores.set(key, { sessionKey, memoryId, score });
  };
  for (const candidate of candidates) {
    add(candidate.sessionKey, candidate.memoryId, candidate.score);
    if (!candidate.spreads) continue;
    weights.forEach((weight, index) => {
      add(candidate.sessionKey, candidate.memoryId - index - 1, weight * candidate.score);
      add(candidate.sessionKey, candidate.memoryId + index + 1, weight * candidate.score);
    });
  }
  return [...scores.values()].sort(
    (left, right) =>
      right.score - left.score ||
      (left.sessionKey < right.sessionKey ? -1 : left.sessionKey > right.sessionKey ? 1 : 0) ||
      left.memoryId - right.memoryId,
  );
}

/** The rank constant of reciprocal-rank fusion: 60 is the value of the method's original evaluation. */
export const rrfRankConstant = 60;

/**
 * Reciprocal-rank fusion: each ranking adds `weight / (60 + rank)` to its items. It needs no common score
 * scale, which BM25, ts_rank and cosine similarity do not share. Returns the items best first (ties: the
 * order in which they were first seen).
 */
export function fuseRankings<T>(rankings: ReadonlyArray<{ items: ReadonlyArray<T>; weight: number }>): T[] {
  const fused = new Map<T, { score: number; seen: number }>();
  for (const ranking of rankings) {
    ranking.items.forEach((item, index) => {
      const found = fused.get(item);
      const score = ranking.weight / (rrfRankConstant + index + 1);
      if (found) found.score += score;
      else fused.set(item, { score, seen: fused.size });
    });
  }
  return [...fused.entries()]
    .sort((left, right) => right[1].score - left[1].score || left[1].seen - right[1].seen)
    .map(([item]) => item);
}
