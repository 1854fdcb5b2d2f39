// A provider-backed chat turn's server CPU: the whole runtime (this tree's compiled dist/) in a process of its
// own, one client sending turns back to back, the model either the OpenAI-compatible provider against the
// benchmarks' scripted model server (a third process) or, with --local, the offline local model. Prints the
// turns, p50 and the server's CPU a turn for three windows after a warm-up; --profile <file> then writes a
// V8 CPU profile of the server over five more seconds (bench/profile-summary.ts reads it). To compare two
// trees, run each tree's copy of this file in turn (bench/results/openclaw.md).
//   npx tsx bench/chat-turn-provider.ts [--local] [--profile /tmp/provider.cpuprofile]
import type { ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { takeFlag } from './args.js';
import { openChatClient } from './chat-client.js';
import { closedLoop } from './chat-turn-driver.js';
import { assertRuntimeBuilt, forkRoleServer, serveRuntime } from './runtime-server.js';
import { scriptedModelId, serveScriptedModel } from './scripted-model-server.js';
import { percentile } from './stats.js';

const token = 'bench-token';
const role = process.env.AGENTD_PROVIDER_BENCH_ROLE;
const warmupMs = 8_000;
const windowMs = 3_000;
const windows = 3;
const profileMs = 5_000;

type Reply = { type: string; value: number };

if (role === 'model') {
  const { server } = await serveScriptedModel();
  process.send!({ type: 'ready', port: (server.address() as { port: number }).port });
} else if (role === 'agentd') {
  const modelUrl = process.env.AGENTD_PROVIDER_BENCH_MODEL_URL;
  const served = await serveRuntime({
    token,
    env: modelUrl ? { AGENTD_MODEL: `openai/${scriptedModelId}`, OPENAI_BASE_URL: modelUrl } : {},
  });
  const profiler = new Session();
  process.on('message', async (message: { type: string; file?: string }) => {
    if (message.type === 'cpu') {
      const usage = process.cpuUsage();
      process.send!({ type: 'cpu', value: usage.user + usage.system });
    } else if (message.type === 'profile-start') {
      profiler.connect();
      await profiler.post('Profiler.enable');
      await profiler.post('Profiler.setSamplingInterval', { interval: 100 });
      await profiler.post('Profiler.start');
      process.send!({ type: 'profile-start', value: 0 });
    } else if (message.type === 'profile-stop') {
      const { profile } = await profiler.post('Profiler.stop');
      writeFileSync(message.file!, JSON.stringify(profile));
      process.send!({ type: 'profile-stop', value: 0 });
    } else if (message.type === 'stop') {
      void served.stop().finally(() => process.exit(0));
    }
  });
  process.send!({ type: 'ready', port: served.port });
} else {
  assertRuntimeBuilt();
  const args = process.argv.slice(2);
  const profileFile = takeFlag(args, '--profile');
  const local = args.includes('--local');
  const start = (name: string, env: Record<string, string> = {}) =>
    forkRoleServer({
      moduleUrl: import.meta.url,
      roleVariable: 'AGENTD_PROVIDER_BENCH_ROLE',
      role: name,
      env,
    });
  const ask = (child: ChildProcess, type: string, file?: string) =>
    new Promise<number>((resolve) => {
      const onMessage = (message: Reply) => {
        if (message.type !== type) return;
        child.off('message', onMessage);
        resolve(message.value);
      };
      child.on('message', onMessage);
      child.send({ type, file });
    });
  const model = local ? undefined : await start('model');
  const agentd = await start(
    'agentd',
    model ? { AGENTD_PROVIDER_BENCH_MODEL_URL: `http://127.0.0.1:${model.port}/v1` } : {},
  );
  const client = await openChatClient(`ws://127.0.0.1:${agentd.port}`, 'p1', token);
  const backToBack = async (durationMs: number) => (await closedLoop([client], durationMs)).latencies;
  await backToBack(warmupMs);
  console.log(
    `model: ${local ? 'the offline local model' : 'the OpenAI-compatible provider, scripted model'}`,
  );
  for (let window = 0; window < windows; window++) {
    const cpuBefore = await ask(agentd.child, 'cpu');
    const latencies = await backToBack(windowMs);
    const cpu = (await ask(agentd.child, 'cpu')) - cpuBefore;
    latencies.sort((left, right) => left - right);
    console.log(
      `turns ${latencies.length}, p50 ${percentile(latencies, 50).toFixed(3)} ms, server CPU ${Math.round(cpu / latencies.length)} µs a turn`,
    );
  }
  if (profileFile) {
    await ask(agentd.child, 'profile-start');
    await backToBack(profileMs);
    await ask(agentd.child, 'profile-stop', profileFile);
    console.log(`profile: ${profileFile}`);
  }
  client.ws.close();
  model?.child.kill();
  agentd.child.once('exit', () => process.exit(0));
  agentd.child.send({ type: 'stop' });
}
