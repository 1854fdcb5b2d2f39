import type { Command } from 'commander';
import { AgentdError, ErrorCodes, UserInputError } from '../../util/index.js';
import { loadRuntime } from '../lazy-modules.js';
import { parsePositiveInt } from '../options.js';
import { type CliIo, printJson, reportError, terminalOf } from '../output.js';
import { terminalLogDestination } from '../pretty-log.js';
import { createProgressDisplay, showAgentProgress } from '../progress.js';
import { connectFromOptions, type RemoteOptions, sessionKeyFor, tokenOption, urlOption } from '../remote.js';
import type { CliCommandDeps } from './chat.js';

function withTimeout<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(
          new AgentdError({
            code: ErrorCodes.timeout,
            message: `the tasks did not finish within ${timeoutMs} ms; they keep running`,
            fault: 'system',
          }),
        ),
      timeoutMs,
    );
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

function printPlan(
  io: CliIo,
  json: boolean,
  plan: { planId: string; reply: string; tasks: Array<{ title: string; workItemId: string }> },
  synthesis: string | undefined,
) {
  if (json) {
    printJson(io, {
      planId: plan.planId,
      reply: plan.reply,
      tasks: plan.tasks,
      ...(synthesis !== undefined ? { synthesis } : {}),
    });
    return;
  }
  io.stdout(`${plan.reply}\n`);
  for (const [index, task] of plan.tasks.entries())
    io.stdout(`  ${index + 1}. ${task.title}  (${task.workItemId})\n`);
  if (synthesis !== undefined) io.stdout(`\n${synthesis}\n`);
}

/** `agentd goal`: a plan of work items for worker agents, in-process or on a running server, and its synthesis. */
export function registerGoalCommand(program: Command, deps: CliCommandDeps): Command {
  const { io } = deps;
  program
    .command('goal')
    .description(
      'turn a goal into a plan of work items run by worker agents; waits for the synthesis unless --detach',
    )
    .argument('<text>', 'the goal')
    .option('-a, --agent <id>', 'agent id', 'main')
    .option('-s, --session <key>', 'session key (default agent:<agent>:main)')
    .option('--detach', 'return once the plan is made; the tasks run in the background (on a running server)')
    .addOption(urlOption('send the goal to a running agentd gateway'))
    .addOption(tokenOption())
    .option(
      '--timeout-ms <ms>',
      'give up waiting for the tasks after this long',
      parsePositiveInt('--timeout-ms'),
      600_000,
    )
    .option(
      '--idempotency-key <key>',
      'name this goal in its session: run again with the same key, it answers the plan already made instead of planning twice',
    )
    .option('--json', 'print JSON')
    .action(
      async (
        text: string,
        options: RemoteOptions & {
          agent: string;
          session?: string;
          detach?: boolean;
          timeoutMs: number;
          idempotencyKey?: string;
          json?: boolean;
        },
      ) => {
        const json = options.json ?? false;
        const sessionKey = sessionKeyFor(options.agent, options.session);
        const keyed = options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey };
        const display = createProgressDisplay(io.stderr, terminalOf(io));
        const show = (data: { phase: string; message: string; workItemId?: string }) => {
          if (!json) showAgentProgress(display, data);
        };
        try {
          if (options.url) {
            const client = await connectFromOptions(options);
            try {
              // Reading the history subscribes this connection to the session's events.
              await client.call('chat.history', { sessionKey, limit: 1 });
              let planId: string | undefined;
              const pending: any[] = [];
              const synthesis = new Promise<any>((resolve) => {
                client.onEvent((event, payload) => {
                  if (event === 'agent.progress') show(payload);
                  if (event === 'agent.synthesis') {
                    if (planId === undefined) pending.push(payload);
                    else if (payload.planId === planId) resolve(payload);
                  }
                });
              });
              const plan = await client.call<{
                planId: string;
                reply: string;
                tasks: Array<{ title: string; workItemId: string }>;
              }>('agent.control', {
                action: 'goal',
                goal: text,
                sessionKey,
                agentId: options.agent,
                ...keyed,
              });
              planId = plan.planId;
              const early = pending.find((payload) => payload.planId === planId);
              const finished = options.detach
                ? undefined
                : await withTimeout(early ? Promise.resolve(early) : synthesis, options.timeoutMs);
              printPlan(io, json, plan, finished?.text);
            } finally {
              await client.close();
            }
            return;
          }
          const runtime = await (await loadRuntime()).createRuntime({
            config: await deps.config(),
            ...terminalLogDestination(),
          });
          try {
            await runtime.startBackground();
            if (!runtime.work.planner)
              throw new UserInputError({
                code: ErrorCodes.invalidConfig,
                message: 'planning is off: features.agent_runtime_v1 is false',
              });
            const off = runtime.bus.subscribe({ sessionKey, types: ['agent:progress'] }, (event) =>
              show(event.data),
            );
            const plan = await runtime.work.planner.plan({
              goal: text,
              sessionKey,
              agentId: options.agent,
              ...keyed,
            });
            const finished = options.detach ? undefined : await withTimeout(plan.finished, options.timeoutMs);
            off();
            printPlan(io, json, plan, finished?.text);
            if (options.detach && !json)
              io.stdout(
                'Detached: the tasks stay queued and run when `agentd serve` runs on this state directory.\n',
              );
          } finally {
            await runtime.close();
          }
        } catch (error) {
          deps.setExitCode(reportError(io, error, json));
        }
      },
    );

  return program;
}
