// Reading a V8 CPU profile (`node --cpu-prof`, or the inspector's `Profiler.stop`): its call tree by node id
// and the names its frames go by in the benchmarks' reports. Shared by bench/profile-summary.ts and
// bench/chat-turn-timeline.ts.

export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  /** µs from the previous sample (the profile's start for the first): each sample's weight. */
  timeDeltas: number[];
}

/** A file's URL from the package or agentd folder on: `dist/memory/ram.js`, `zod/v4/core/parse.js`. */
export const shortUrl = (url: string) =>
  url.replace(/^file:\/\/.*?\/node_modules\//, '').replace(/^file:\/\/.*?\/(src|bench|dist)\//, '$1/');

/** The profile's nodes by id, each node's parent, and the name each frame goes by in a report. */
export function profileTree(profile: CpuProfile): {
  byId: Map<number, ProfileNode>;
  parentOf: Map<number, number>;
  frameName(id: number): string;
} {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const frameName = (id: number) => {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    const name = functionName || '(anonymous)';
    return url ? `${name} ${shortUrl(url)}:${lineNumber + 1}` : name;
  };
  return { byId, parentOf, frameName };
}
