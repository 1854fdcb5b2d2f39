import { z } from 'zod';
import type { Bus } from '../bus/index.js';
import { runEngage } from '../engage/index.js';
import { createToolRegistry, defineTool, type ToolDefinition } from '../tools/index.js';
import type { IdGenerator, Logger } from '../util/index.js';
import type { AgentToolSpec, RunAgentWithTools } from '../workflow/index.js';

function toEngageTool(spec: AgentToolSpec): ToolDefinition {
  let input: z.ZodType<Record<string, unknown>>;
  try {
    input = z.fromJSONSchema(spec.inputSchema) as z.ZodType<Record<string, unknown>>;
  } catch {
    // A schema zod cannot rebuild still gets an object check; the tool validates the rest itself.
    input = z.record(z.string(), z.unknown());
  }
  return defineTool({
    name: spec.name,
    description: spec.description,
    input,
    async execute(args, context) {
      const result = await spec.execute(args, { signal: context.signal });
      return typeof result === 'string' ? result : JSON.stringify(result);
    },
  });
}

/**
 * Agent nodes of a workflow that list tools run through the same engage loop as chat turns, so hooks,
 * parallel tools and turn limits behave the same in both places.
 */
export function createWorkflowAgentRunner(options: {
  bus: Bus;
  workspaceDir: string;
  idGenerator: IdGenerator;
  logger: Logger;
  /** Secret redaction for tool results, as for chat turns. */
  redactText?: (text: string) => string;
}): RunAgentWithTools {
  return async (call) => {
    const registry = createToolRegistry(
      call.tools.map(toEngageTool),
      options.redactText ? { redactText: options.redactText } : {},
    );
    const runId = options.idGenerator('wfrun');
    const result = await runEngage({
      model: call.model,
      messages: call.messages,
      tools: { registry },
      workspaceDir: options.workspaceDir,
      workItemId: `workflow:${runId}`,
      scope: { runId, agentId: String(call.metadata.agentId ?? 'workflow') },
      bus: options.bus,
      signal: call.signal,
      limits: { ...(call.maxTurns !== undefined ? { maxTurns: call.maxTurns } : {}) },
      modelCallOptions: {
        ...(call.maxTokens !== undefined ? { maxTokens: call.maxTokens } : {}),
        ...(call.temperature !== undefined ? { temperature: call.temperature } : {}),
      },
      logger: options.logger,
    });
    return {
      text: result.text,
      ...(result.error ? { error: { code: result.error.code, message: result.error.message } } : {}),
    };
  };
}
