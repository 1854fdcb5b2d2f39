import { describe, expect, it } from 'vitest';
import {
  abortRun,
  createRunIdGenerator,
  createRunState,
  newRootTask,
  newTaskRecord,
  nextStage,
  nodeInput,
  normalizeRequest,
  queueStage,
  rootSpec,
  settledState,
  signalOf,
  stageOutputs,
} from '../../../src/workflow/engine/run-state.js';
import type { StageRecord } from '../../../src/workflow/index.js';

const root = () =>
  newTaskRecord('wf', 5, { taskId: 't', rootTaskId: 't', spec: rootSpec('t', { request: 'hi' }) });

function stage(nodeId: string, nodeStatus: StageRecord['nodeStatus'], output: unknown): StageRecord {
  return {
    index: 0,
    nodeId,
    nodeRole: 'linear',
    nodeKind: 'deterministic',
    input: null,
    output,
    nodeStatus,
    toolCalls: [],
    contextProfileId: 'none',
    contextMetadata: undefined,
    startedAt: 0,
    completedAt: 0,
  };
}

describe('run state', () => {
  it('makes a root task as newTaskRecord does, the same fields in the same order', () => {
    const spec = rootSpec('r', { v: 1 });
    const made = newRootTask('wf', 42, 'r', spec);
    const general = newTaskRecord('wf', 42, { taskId: 'r', rootTaskId: 'r', spec });
    expect(made).toEqual(general);
    expect(Object.keys(made)).toEqual(Object.keys(general));
    expect(JSON.stringify(made)).toBe(JSON.stringify(general));
  });

  it('starts a task queued and pending, stamped with the given time, fields overriding defaults', () => {
    const task = newTaskRecord('wf', 42, {
      taskId: 'a',
      rootTaskId: 'r',
      spec: rootSpec('a', 'x'),
      lifecycle: 'active',
    });
    expect(task).toMatchObject({ workflowId: 'wf', lifecycle: 'active', state: 'pending', createdAt: 42 });
    expect(task.history).toEqual([]);
    expect(task.childTaskIds).toEqual([]);
  });

  it('holds the root in its task map and hands stages out first in, first out', () => {
    const task = root();
    const run = createRunState(task, 'start');
    expect(run.tasks.get('t')).toBe(task);
    queueStage(run, task, 'a');
    queueStage(run, task, 'b');
    expect(nextStage(run)).toBe(task);
    expect(run.nextNodeId).toBe('a');
    queueStage(run, task, 'c');
    expect(nextStage(run)).toBe(task);
    expect(run.nextNodeId).toBe('b');
    expect(nextStage(run)).toBe(task);
    expect(run.nextNodeId).toBe('c');
    expect(nextStage(run)).toBeUndefined();
    // A chain's one queued stage at a time.
    queueStage(run, task, 'd');
    expect(nextStage(run)).toBe(task);
    expect(run.nextNodeId).toBe('d');
    expect(run.queue).toEqual([]);
    // Taken slots are released so a long run does not keep every stage alive.
    expect(run.queue.every((slot) => slot === undefined)).toBe(true);
  });

  it('creates the abort signal on demand, aborted when the run was cancelled first', () => {
    const run = createRunState(root(), 'start');
    expect(run.controller).toBeUndefined();
    abortRun(run, new Error('stop'));
    expect(run.cancelled).toBe(true);
    expect(signalOf(run).aborted).toBe(true);

    const live = createRunState(root(), 'start');
    const signal = signalOf(live);
    expect(signal.aborted).toBe(false);
    abortRun(live, 'why');
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe('why');
  });

  it('settles a task completed, partial after a tolerated failure, and keeps failed or partial', () => {
    const task = root();
    expect(settledState(task)).toBe('completed');
    task.toleratedFailure = true;
    expect(settledState(task)).toBe('partial');
    task.state = 'failed';
    expect(settledState(task)).toBe('failed');
  });

  it('feeds the run input until a node produced output, then that output (null included)', () => {
    const task = root();
    expect(nodeInput(task)).toEqual({ request: 'hi' });
    task.currentOutput = null;
    expect(nodeInput(task)).toBeNull();
  });

  it('lists the outputs of stages that did not fail', () => {
    const task = root();
    task.history.push(stage('a', 'success', 1), stage('b', 'failure', null), stage('c', 'partial', 3));
    expect(stageOutputs(task)).toEqual({ a: 1, c: 3 });
  });

  it('derives the request from a string, a request field, or the JSON of the input', () => {
    expect(normalizeRequest('plain')).toBe('plain');
    expect(normalizeRequest({ request: 'field', other: 1 })).toBe('field');
    expect(normalizeRequest({ v: 1 })).toBe('{"v":1}');
    expect(normalizeRequest(undefined)).toBe('null');
  });

  it('fills the spec defaults', () => {
    expect(rootSpec('id', 'x', { priority: 'high' })).toEqual({
      taskSpecId: 'id',
      request: 'x',
      input: 'x',
      mode: 'implement',
      priority: 'high',
      hints: [],
      files: [],
      overrides: [],
      metadata: {},
    });
  });

  it('generates distinct, prefixed, time-ordered ids', () => {
    let now = 1_700_000_000_000;
    const next = createRunIdGenerator(() => now);
    const first = next('wft');
    now += 60_000;
    const second = next('wft');
    expect(first).toMatch(/^wft_/);
    expect(first).not.toBe(second);
    expect(first < second).toBe(true);
  });

  it('takes the time it is handed instead of reading it', () => {
    let readings = 0;
    const next = createRunIdGenerator(() => {
      readings++;
      return 1_700_000_000_000;
    });
    const handed = next('wft', 1_700_000_060_000);
    expect(readings).toBe(0);
    expect(handed.startsWith(`wft_${(1_700_000_060_000).toString(36)}`)).toBe(true);
    expect(next('wft').startsWith(`wft_${(1_700_000_000_000).toString(36)}`)).toBe(true);
    expect(readings).toBe(1);
  });
});
