import type { PlanResult } from '../../src/agents/index.js';
import type { Bus, BusEvent, BusEventMap, BusEventType } from '../../src/bus/index.js';
import type { ScriptedReply } from '../../src/testing.js';

export interface Deferred<T = void> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(reason: unknown): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Resolves with the first event of `type` that satisfies `predicate`. */
export function nextEvent<K extends BusEventType>(
  bus: Bus,
  type: K,
  predicate: (data: BusEventMap[K]) => boolean = () => true,
): Promise<BusEvent<K>> {
  return new Promise((resolve) => {
    const off = bus.on(type, (event) => {
      if (!predicate(event.data)) return;
      off();
      resolve(event);
    });
  });
}

/** Resolves after `count` events of `type` matching `predicate`. */
export function countEvents<K extends BusEventType>(
  bus: Bus,
  type: K,
  count: number,
  predicate: (data: BusEventMap[K]) => boolean = () => true,
): Promise<Array<BusEvent<K>>> {
  const seen: Array<BusEvent<K>> = [];
  return new Promise((resolve) => {
    const off = bus.on(type, (event) => {
      if (!predicate(event.data)) return;
      seen.push(event);
      if (seen.length === count) {
        off();
        resolve(seen);
      }
    });
  });
}

/** A keyed goal, as the idempotency tests send it. */
export const keyedGoal = {
  goal: 'ship the release',
  sessionKey: 'agent:main:s',
  agentId: 'main',
  idempotencyKey: 'k-1',
};

/** The model's plan for `keyedGoal.goal`: three tasks. */
export function planReply(extra: Partial<ScriptedReply> = {}): ScriptedReply {
  return {
    text: JSON.stringify({
      reply: 'Three steps.',
      tasks: ['build', 'test', 'publish'].map((title) => ({ title, description: `${title} it` })),
    }),
    ...extra,
  };
}

/** What a caller is answered, without the promise of the synthesis and whether it was a replay. */
export const answerOf = ({ finished: _finished, replayed: _replayed, ...answer }: PlanResult) => answer;
