import { z } from 'zod';
import { defaultGatewayLimits } from './connection.js';

/** `gateway:` in agentd.yaml. The token itself comes from the environment (AGENTD_TOKEN), never the file. */
export const gatewayConfigSchema = z.object({
  host: z.string().default('127.0.0.1'),
  port: z.number().int().min(0).max(65_535).default(7_777),
  allowedOrigins: z.array(z.string()).default([]),
  /**
   * `Host` header values served besides loopback (`agentd.example.com`, or `name:port` for one port). A
   * gateway on loopback answers only loopback names and these; see docs/security.md.
   */
  allowedHosts: z.array(z.string().min(1)).default([]),
  limits: z
    .object({
      maxFrameBytes: z.number().int().positive().default(defaultGatewayLimits.maxFrameBytes),
      maxMessageBytes: z.number().int().positive().default(defaultGatewayLimits.maxMessageBytes),
      maxBufferedBytes: z.number().int().positive().default(defaultGatewayLimits.maxBufferedBytes),
      maxConnections: z.number().int().positive().default(defaultGatewayLimits.maxConnections),
      preConnectMaxBytes: z.number().int().positive().default(defaultGatewayLimits.preConnectMaxBytes),
      handshakeTimeoutMs: z.number().int().positive().default(defaultGatewayLimits.handshakeTimeoutMs),
      requestTimeoutMs: z.number().int().positive().default(defaultGatewayLimits.requestTimeoutMs),
      tickIntervalMs: z.number().int().positive().default(defaultGatewayLimits.tickIntervalMs),
      maxPendingRequests: z.number().int().positive().default(defaultGatewayLimits.maxPendingRequests),
    })
    .prefault({}),
});

export type GatewayConfig = z.infer<typeof gatewayConfigSchema>;
