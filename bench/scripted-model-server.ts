// An OpenAI-compatible Chat Completions server with one fixed short reply, streamed as SSE: the model
// behind agentd (and OpenClaw) in the benchmarks that time whole chat turns through the provider.
import { createServer, type Server } from 'node:http';

export const scriptedModelId = 'fake-model';
const replyParts = ['Hello from the ', 'scripted model.'];

/** An OpenAI-compatible Chat Completions server with one fixed short reply, streamed as SSE. */
export function serveScriptedModel(): Promise<{
  server: Server;
  stats: { requests: number; requestBytes: number };
}> {
  const stats = { requests: 0, requestBytes: 0 };
  const chunk = (id: string, delta: object, finish: string | null) =>
    `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 1, model: scriptedModelId, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  const server = createServer((request, response) => {
    let bytes = 0;
    let streamed = false;
    request.on('data', (data: Buffer) => {
      bytes += data.length;
      if (!streamed && data.includes('"stream":true')) streamed = true;
    });
    request.on('end', () => {
      if (request.method !== 'POST' || !request.url?.endsWith('/chat/completions')) {
        response.writeHead(404, { 'content-type': 'application/json' });
        response.end('{"error":{"message":"not found"}}');
        return;
      }
      stats.requests++;
      stats.requestBytes += bytes;
      const id = `chatcmpl-${stats.requests}`;
      const usage = {
        prompt_tokens: 10,
        completion_tokens: replyParts.length,
        total_tokens: 10 + replyParts.length,
      };
      if (!streamed) {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(
          JSON.stringify({
            id,
            object: 'chat.completion',
            created: 1,
            model: scriptedModelId,
            choices: [
              {
                index: 0,
                message: { role: 'assistant', content: replyParts.join('') },
                finish_reason: 'stop',
              },
            ],
            usage,
          }),
        );
        return;
      }
      response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      response.write(chunk(id, { role: 'assistant', content: '' }, null));
      for (const part of replyParts) response.write(chunk(id, { content: part }, null));
      response.write(chunk(id, {}, 'stop'));
      response.write(
        `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 1, model: scriptedModelId, choices: [], usage })}\n\n`,
      );
      response.end('data: [DONE]\n\n');
    });
  });
  server.keepAliveTimeout = 60_000;
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, stats })));
}
