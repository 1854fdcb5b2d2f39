export { type Bus, type BusFilter, type BusHandler, type CreateBusOptions, createBus } from './bus.js';
export type { BusEvent, BusEventMap, BusEventScope, BusEventType, RunStatus } from './events.js';
