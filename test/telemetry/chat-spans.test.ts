import { metrics } from '@opentelemetry/api';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createRuntime, defineTool, loadConfig, type Runtime } from '../../src/index.js';
import { createScriptedModel } from '../../src/testing.js';
import { captureLog, tempHome } from '../runtime/helpers.js';
import { namesOf, useTracing } from './otel-harness.js';

class OnDemandReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

const tracing = useTracing();

describe('the span tree of a chat turn with tools', () => {
  let runtime: Runtime | undefined;
  let meterProvider: MeterProvider | undefined;
  afterEach(async () => {
    await runtime?.close();
    runtime = undefined;
    await meterProvider?.shutdown();
    metrics.disable();
  });

  it('chat run → recall and agent run → turns → model call, tool calls, code run → its tool call', async () => {
    const reader = new OnDemandReader();
    meterProvider = new MeterProvider({ readers: [reader] });
    metrics.setGlobalMeterProvider(meterProvider);
    const add = defineTool({
      name: 'add',
      description: 'Adds two numbers.',
      input: z.object({ a: z.number(), b: z.number() }),
      execute: async ({ a, b }) => String(a + b),
    });
    const model = createScriptedModel({
      modelId: 'scripted-chat',
      steps: [
        {
          toolCalls: [
            { id: 'call_add', name: 'add', arguments: { a: 2, b: 3 } },
            {
              id: 'call_code',
              name: 'execute_code',
              arguments: { language: 'javascript', code: 'return await tools.add({ a: 1, b: 1 });' },
            },
          ],
          usage: { inputTokens: 100, outputTokens: 10 },
        },
        { text: 'five and two', usage: { inputTokens: 150, outputTokens: 4 } },
      ],
    });
    const home = tempHome('agentd-otel-');
    const config = loadConfig({ cwd: home, env: { AGENTD_HOME: home } });
    runtime = await createRuntime({
      config,
      env: { AGENTD_HOME: home },
      model,
      tools: [add],
      logDestination: captureLog().stream,
    });

    const reply = await runtime.sendMessage({ text: 'add 2 and 3, then 1 and 1 in code' });
    expect(reply.status).toBe('completed');
    model.assertAllConsumed();

    const chatRun = tracing.span('chat_run');
    expect(chatRun.parentSpanContext).toBeUndefined();
    expect(chatRun.attributes).toMatchObject({
      'agentd.run.id': reply.runId,
      'gen_ai.agent.id': 'main',
      'agentd.run.status': 'completed',
    });
    expect(chatRun.attributes['gen_ai.conversation.id']).toEqual(expect.any(String));
    expect(namesOf(tracing.tree(chatRun))).toEqual({
      chat_run: [
        'memory_recall',
        {
          'invoke_agent main': [
            {
              engage_turn: [
                'chat scripted-chat',
                'execute_tool add',
                { 'execute_tool execute_code': [{ 'code_run javascript': ['execute_tool add'] }] },
              ],
            },
            { engage_turn: ['chat scripted-chat'] },
          ],
        },
      ],
    });

    // Parent ids along one path, asserted directly: chat run → agent run → turn → tool → code run → tool.
    const agentRun = tracing.span('invoke_agent main');
    const [firstTurn] = tracing.childrenOf(agentRun);
    const codeTool = tracing.span('execute_tool execute_code');
    const codeRun = tracing.span('code_run javascript');
    const nested = tracing.spans().find((span) => span.attributes['gen_ai.tool.call.id'] === 'call_code.1')!;
    expect(agentRun.parentSpanContext?.spanId).toBe(chatRun.spanContext().spanId);
    expect(firstTurn!.parentSpanContext?.spanId).toBe(agentRun.spanContext().spanId);
    expect(codeTool.parentSpanContext?.spanId).toBe(firstTurn!.spanContext().spanId);
    expect(codeRun.parentSpanContext?.spanId).toBe(codeTool.spanContext().spanId);
    expect(nested.parentSpanContext?.spanId).toBe(codeRun.spanContext().spanId);

    const modelCalls = tracing.spans().filter((span) => span.name === 'chat scripted-chat');
    expect(modelCalls.map((span) => span.attributes['gen_ai.usage.input_tokens'])).toEqual([100, 150]);
    expect(modelCalls[0]!.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'scripted-chat',
    });
    expect(agentRun.attributes).toMatchObject({
      'gen_ai.usage.input_tokens': 250,
      'gen_ai.usage.output_tokens': 14,
      'gen_ai.conversation.id': chatRun.attributes['agentd.session.key'],
    });
    const direct = tracing.spans().find((span) => span.attributes['gen_ai.tool.call.id'] === 'call_add')!;
    expect(direct.name).toBe('execute_tool add');
    expect(direct.parentSpanContext?.spanId).toBe(firstTurn!.spanContext().spanId);

    // The turn's SLO metrics, through the global meter and on /metrics.
    const { resourceMetrics } = await reader.collect();
    const names = resourceMetrics.scopeMetrics.flatMap((scope) =>
      scope.metrics.filter((metric) => metric.dataPoints.length > 0).map((metric) => metric.descriptor.name),
    );
    expect(names).toEqual(expect.arrayContaining(['agentd.response.duration', 'agentd.memory.recalls']));
    const text = runtime.metrics.render();
    expect(text).toContain('agentd_response_seconds_count{status="completed"} 1');
    expect(text).toMatch(/agentd_recalls_total\{outcome="(hit|empty)"\} 1/);
  });
});
