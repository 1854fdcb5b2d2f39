import { createContext } from 'preact';
import { useContext, useEffect, useRef } from 'preact/hooks';
import type { EventHandler, Gateway } from './gateway.js';

export const GatewayContext = createContext<Gateway | undefined>(undefined);

export function useGateway(): Gateway {
  const gateway = useContext(GatewayContext);
  if (!gateway) throw new Error('useGateway outside a connected dashboard');
  return gateway;
}

/** Subscribes to gateway events for the component's lifetime; the latest handler is always the one called. */
export function useGatewayEvents(handler: EventHandler): void {
  const gateway = useGateway();
  const latest = useRef(handler);
  latest.current = handler;
  useEffect(() => gateway.onEvent((event, payload) => latest.current(event, payload)), [gateway]);
}

/** Calls `fn` now and every `intervalMs` while mounted and the tab is visible. */
export function usePolling(fn: () => void, intervalMs: number, deps: unknown[] = []): void {
  const latest = useRef(fn);
  latest.current = fn;
  useEffect(() => {
    latest.current();
    const timer = setInterval(() => {
      if (document.visibilityState === 'visible') latest.current();
    }, intervalMs);
    return () => clearInterval(timer);
  }, deps);
}

export function errorText(error: unknown): string {
  if (error && typeof error === 'object' && 'message' in error) {
    const code = 'code' in error ? `${String((error as { code: unknown }).code)}: ` : '';
    return `${code}${String((error as { message: unknown }).message)}`;
  }
  return String(error);
}

export function timeOf(ms: number | null | undefined): string {
  if (!ms) return '—';
  return new Date(ms).toLocaleTimeString();
}
