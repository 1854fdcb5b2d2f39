import { ErrorCodes, UserInputError } from '../util/index.js';
import { isTerminalWorkState } from '../work/index.js';
import './events.js';
import { admit } from './pool/admission.js';
import { claimLoop } from './pool/claim-loop.js';
import { cancelItems, pauseItems, resumeItems, snapshot } from './pool/control.js';
import { checkIdle, createPoolState, stoppingReason, wakeAll } from './pool/state.js';
import type { CreateWorkerPoolOptions, WorkerPool } from './pool/types.js';

export type {
  CreateWorkerPoolOptions,
  PoolSelector,
  RunItem,
  RunItemContext,
  WorkerClassOptions,
  WorkerClassSnapshot,
  WorkerPool,
  WorkerPoolSnapshot,
} from './pool/types.js';

/**
 * Worker sub-brains: claims work items from the durable queue and runs them with bounded
 * concurrency per class. The memory manager gets its own class so it never takes a chat slot.
 *
 * The steps live in `pool/`, functions of one `PoolState`: admission (`admission.ts`), the claim loops
 * (`claim-loop.ts`), running an item with its lease (`run-item.ts`), batched completions
 * (`completions.ts`) and pause/resume/cancel/snapshot (`control.ts`).
 */
export function createWorkerPool(options: CreateWorkerPoolOptions): WorkerPool {
  const pool = createPoolState(options);
  const { bus, classes, running } = pool;

  // An item cancelled, paused or blocked from anywhere (CLI, gateway, its own report_blocked, another
  // process) stops running here.
  const unsubscribe = bus?.subscribe(
    { types: ['work:cancelled', 'work:paused', 'work:blocked'] },
    (event) => {
      running
        .get(event.data.workItemId)
        ?.controller.abort(
          new UserInputError({ code: ErrorCodes.aborted, message: `work item ${event.type.slice(5)}` }),
        );
    },
  );
  // Admitted tasks that stop waiting before this pool starts them (claimed elsewhere, paused, ended) leave
  // the admission queue.
  const unsubscribeTerminal = bus?.subscribe(
    {
      types: ['work:claimed', 'work:paused', 'work:completed', 'work:failed', 'work:dead', 'work:cancelled'],
    },
    (event) => {
      const { data } = event;
      if (event.type !== 'work:claimed' && event.type !== 'work:paused' && !isTerminalWorkState(data.state))
        return;
      for (const state of classes) if (state.admitted.delete(data.workItemId)) checkIdle(pool);
    },
  );

  return {
    workerId: pool.workerId,
    start() {
      if (pool.started) return;
      pool.started = true;
      pool.stopped = false;
      pool.loopController = new AbortController();
      for (const state of classes) {
        for (let index = 0; index < Math.min(pool.claimLoops, state.options.concurrency); index++)
          pool.loops.push(claimLoop(pool, state));
      }
    },
    async stop() {
      pool.stopped = true;
      pool.loopController.abort();
      wakeAll(pool);
      for (const entry of running.values()) entry.controller.abort(stoppingReason);
      await Promise.all([...pool.loops.splice(0), ...[...running.values()].map((entry) => entry.done)]);
      unsubscribe?.();
      unsubscribeTerminal?.();
      pool.started = false;
    },
    submit: (submission) => admit(pool, submission),
    pause: (selector) => pauseItems(pool, selector),
    resume: (selector) => resumeItems(pool, selector),
    cancel: (selector) => cancelItems(pool, selector),
    snapshot: (selector) => snapshot(pool, selector),
    idle() {
      return new Promise<void>((resolve) => {
        pool.idleWaiters.push(resolve);
        checkIdle(pool);
      });
    },
  };
}
