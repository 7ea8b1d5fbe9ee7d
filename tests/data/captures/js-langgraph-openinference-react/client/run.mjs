// env: langgraphjs
// LangGraph.js createReactAgent (@langchain/openai ChatOpenAI at the fake model) traced by
// @arizeai/openinference-instrumentation-langchain, exported over OTLP/HTTP protobuf by the
// OTel Node SDK. Graph "travel_assistant" (prompt, tools get_weather and local_expert, a tool that
// invokes a second react agent "local_expert"), MemorySaver checkpointer, thread "thread-lgjs-1":
//  turn 1 "What is the weather in Paris?" -> get_weather({"city": "Paris"}) -> "Sunny, 22C"
//         -> "Result from get_weather: Sunny, 22C"
//  turn 2 "Ask the local_expert about Berlin." -> local_expert({"query": ...}) -> nested graph
//         -> get_weather({"city": "Berlin"}) -> "Result from get_weather: Cloudy, 15C"
//         -> "Result from local_expert: Result from get_weather: Cloudy, 15C"
import { NodeTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-node';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { LangChainInstrumentation } from '@arizeai/openinference-instrumentation-langchain';
import * as CallbackManagerModule from '@langchain/core/callbacks/manager';

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': process.env.CAPTURE_CASE }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: process.env.OTLP_HTTP_ENDPOINT + '/v1/traces' }))],
});
provider.register();
const instrumentation = new LangChainInstrumentation();
instrumentation.manuallyInstrument(CallbackManagerModule);

const { ChatOpenAI } = await import('@langchain/openai');
const { tool } = await import('@langchain/core/tools');
const { createReactAgent } = await import('@langchain/langgraph/prebuilt');
const { MemorySaver } = await import('@langchain/langgraph');
const { z } = await import('zod');

const WEATHER = { Paris: 'Sunny, 22C', Berlin: 'Cloudy, 15C' };
const llm = new ChatOpenAI({ model: 'gpt-4o-mini', apiKey: 'sk-fake-local', configuration: { baseURL: process.env.OPENAI_BASE_URL } });
const getWeather = tool(async ({ city }) => WEATHER[city] ?? 'Unknown', {
  name: 'get_weather', description: 'Get the current weather for a city', schema: z.object({ city: z.string() }),
});
const expert = createReactAgent({ llm, tools: [getWeather], name: 'local_expert',
  prompt: 'You are a local expert who knows the weather everywhere.' });
const localExpert = tool(async ({ query }) => {
  const out = await expert.invoke({ messages: [{ role: 'user', content: query }] });
  return out.messages.at(-1).content;
}, { name: 'local_expert', description: 'Ask the local expert agent about a place', schema: z.object({ query: z.string() }) });
const agent = createReactAgent({ llm, tools: [getWeather, localExpert], name: 'travel_assistant',
  prompt: 'You are a concise travel assistant.', checkpointSaver: new MemorySaver() });
const config = { configurable: { thread_id: 'thread-lgjs-1' } };
for (const text of ['What is the weather in Paris?', 'Ask the local_expert about Berlin.']) {
  const out = await agent.invoke({ messages: [{ role: 'user', content: text }] }, config);
  console.log('turn:', out.messages.at(-1).content);
}
await provider.shutdown();
