/**
 * A provider SDK's client, made at the first call rather than at start-up (a runtime on another provider
 * never loads the SDK), and the model's `prepare`, which makes it ahead of that call.
 */
export function lazySdkClient<Client>(make: () => Promise<Client>): {
  client(): Promise<Client>;
  prepare(): Promise<void>;
} {
  let made: Promise<Client> | undefined;
  const client = () => (made ??= make());
  return {
    client,
    async prepare() {
      await client();
      // The SDKs build every request with the Fetch API's classes, which Node loads at their first use
      // (undici, about 50 ms on a slow host): making one here is that load.
      new Headers();
    },
  };
}
