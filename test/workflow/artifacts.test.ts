import { describe, expect, it } from 'vitest';
import { type Artifact, createArtifactStore } from '../../src/workflow/artifacts.js';
import type { StageRecord } from '../../src/workflow/task.js';

const artifact = (taskId: string, index: number, type: Artifact['type'] = 'node_output'): Artifact => ({
  artifactId: `${taskId}:${index}`,
  rootTaskId: 'r',
  taskId,
  nodeId: `n${index}`,
  type,
  createdAt: index,
  payload: index,
  metadata: {},
});

const stage = (index: number): StageRecord => ({
  index,
  nodeId: `s${index}`,
  nodeRole: 'linear',
  nodeKind: 'deterministic',
  input: null,
  output: index,
  nodeStatus: 'success',
  toolCalls: [],
  contextProfileId: 'none',
  contextMetadata: undefined,
  startedAt: index,
  completedAt: index,
});

describe('artifact store', () => {
  it('answers for a root task from its run, without the other tasks of the run', () => {
    const store = createArtifactStore();
    store.addRootStage('r', stage(0));
    store.add(artifact('r-clone-0', 1));
    store.add(artifact('r-clone-1', 2));
    store.add(artifact('r', 3, 'telemetry_snapshot'));
    expect(store.query({ taskId: 'r' }).map((entry) => entry.artifactId)).toEqual(['r:0', 'r:3']);
    expect(store.query({ taskId: 'r-clone-1' }).map((entry) => entry.artifactId)).toEqual(['r-clone-1:2']);
    expect(store.query({ taskId: 'r', type: 'node_output' })[0]).toMatchObject({
      artifactId: 'r:0',
      nodeId: 's0',
      payload: 0,
    });
    expect(store.query({ rootTaskId: 'r' })).toHaveLength(4);
    store.forget('r');
    expect(store.query({ taskId: 'r' })).toEqual([]);
    expect(store.query({ taskId: 'r-clone-0' })).toEqual([]);
    // Appends after a forget go to a new list, not the forgotten one.
    store.add(artifact('r', 4));
    expect(store.query({ rootTaskId: 'r' }).map((entry) => entry.artifactId)).toEqual(['r:4']);
  });

  it('makes an artifact added for later on its first read, once, in its place in the run', () => {
    const store = createArtifactStore();
    let made = 0;
    store.addRootStage('r', stage(0));
    store.addLater('r', () => {
      made++;
      return artifact('r', 1, 'telemetry_snapshot');
    });
    store.addRootStage('r', stage(2));
    expect(made).toBe(0);
    expect(store.query({ taskId: 'r' }).map((entry) => entry.artifactId)).toEqual(['r:0', 'r:1', 'r:2']);
    expect(store.forRun('r', false).map((entry) => entry.type)).toEqual(['telemetry_snapshot']);
    expect(store.query({ rootTaskId: 'r', type: 'node_output' })).toHaveLength(2);
    expect(store.query({ type: 'telemetry_snapshot' })[0]).toBe(store.forRun('r')[1]);
    expect(made).toBe(1);
    store.forget('r');
    expect(store.query({ rootTaskId: 'r' })).toEqual([]);
  });
});
