package dev.spanhouse.test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.logging.log4j.LogManager;
import org.elasticsearch.common.settings.Settings;
import org.elasticsearch.env.Environment;
import org.elasticsearch.http.HttpServerTransport;
import org.elasticsearch.index.reindex.ReindexPlugin;
import org.elasticsearch.node.InternalSettingsPreparer;
import org.elasticsearch.node.Node;
import org.elasticsearch.plugins.Plugin;
import org.elasticsearch.transport.Netty4Plugin;
import org.elasticsearch.transport.TransportService;

/**
 * One Elasticsearch 7.10.2 node, in this process, for spanhouse's tests: the server jar and the
 * modules it needs (netty4 for HTTP and transport, reindex for _delete_by_query) all come from the
 * classpath, so nothing has to be unpacked or installed. The OSS node: no x-pack on the
 * classpath, so no security, ILM or licence (and no {@code xpack.*} setting exists), and no
 * analysis-common (not published for 7.10.2; the standard analyzers are in the server).
 * It mirrors tests/opensearch's OpenSearchLauncher, which is the same code for OpenSearch.
 *
 * <pre>
 * java -cp target/elasticsearch-launcher.jar:target/lib/* dev.spanhouse.test.ElasticsearchLauncher \
 *     --dir DIR --http-port N --transport-port N [--cluster-name NAME] [--node-name NAME]
 * </pre>
 *
 * DIR holds the node's home (DIR/home) and its data (DIR/data); started again on the same DIR,
 * the node finds its indices again. Once it serves HTTP it prints a line starting with
 * {@code ELASTICSEARCH STARTED}. SIGTERM closes the node and the process exits 0.
 */
public final class ElasticsearchLauncher {

    /** Node's constructor that takes plugin classes is protected: this exposes it. */
    static final class ClasspathNode extends Node {
        ClasspathNode(Environment environment, Collection<Class<? extends Plugin>> plugins) {
            super(environment, plugins, true);
        }
    }

    private static final int EXIT_USAGE = 2;
    private static final int EXIT_FAILED = 1;

    private ElasticsearchLauncher() {}

    private static void usage(String why) {
        System.err.println("ElasticsearchLauncher: " + why);
        System.err.println("usage: ElasticsearchLauncher --dir DIR --http-port N --transport-port N"
                + " [--cluster-name NAME] [--node-name NAME]");
        System.exit(EXIT_USAGE);
    }

    private static int port(String name, String value) {
        try {
            int p = Integer.parseInt(value);
            if (p > 0 && p < 65536) {
                return p;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        usage(name + " wants a port number, got '" + value + "'");
        return 0;
    }

    public static void main(String[] args) throws Exception {
        Path dir = null;
        int httpPort = 0;
        int transportPort = 0;
        String clusterName = "spanhouse-test";
        String nodeName = "node-1";
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (i + 1 >= args.length) {
                usage("missing value after " + arg);
            }
            String value = args[++i];
            switch (arg) {
                case "--dir": dir = Path.of(value).toAbsolutePath(); break;
                case "--http-port": httpPort = port(arg, value); break;
                case "--transport-port": transportPort = port(arg, value); break;
                case "--cluster-name": clusterName = value; break;
                case "--node-name": nodeName = value; break;
                default: usage("unknown argument " + arg);
            }
        }
        if (dir == null || httpPort == 0 || transportPort == 0) {
            usage("--dir, --http-port and --transport-port are required");
        }

        Path home = dir.resolve("home");
        Path data = dir.resolve("data");
        Files.createDirectories(home.resolve("config"));
        Files.createDirectories(home.resolve("plugins"));
        Files.createDirectories(home.resolve("modules"));
        Files.createDirectories(home.resolve("logs"));
        Files.createDirectories(data);

        Settings settings = Settings.builder()
                .put("cluster.name", clusterName)
                .put("node.name", nodeName)
                .put("path.home", home.toString())
                .put("path.data", data.toString())
                .put("path.logs", home.resolve("logs").toString())
                .put("network.host", "127.0.0.1")
                .put("http.port", httpPort)
                .put("transport.port", transportPort)
                .put("discovery.type", "single-node")
                // Tests run on developers' disks, which may be nearly full: never make the
                // indices read-only or refuse to allocate shards because of it.
                .put("cluster.routing.allocation.disk.threshold_enabled", false)
                .put("action.auto_create_index", true)
                // The netty4 plugin provides both; say so rather than rely on defaults.
                .put("http.type", "netty4")
                .put("transport.type", "netty4")
                .build();

        String name = nodeName;
        Environment environment = InternalSettingsPreparer.prepareEnvironment(
                settings, Collections.emptyMap(), home.resolve("config"), () -> name);
        List<Class<? extends Plugin>> plugins = List.of(Netty4Plugin.class, ReindexPlugin.class);

        Node node;
        try {
            node = new ClasspathNode(environment, plugins);
        } catch (Exception e) {
            e.printStackTrace();
            // Last, so the tail of the log a test shows has it.
            System.err.println("ELASTICSEARCH FAILED: could not create the node: " + e);
            LogManager.shutdown();
            System.exit(EXIT_FAILED);
            return;
        }

        CountDownLatch closed = new CountDownLatch(1);
        Thread hook = new Thread(() -> {
            try {
                System.out.println("ELASTICSEARCH STOPPING");
                node.close();
                if (!node.awaitClose(30, TimeUnit.SECONDS)) {
                    System.err.println("ELASTICSEARCH: the node did not close within 30 s");
                }
                System.out.println("ELASTICSEARCH STOPPED");
            } catch (IOException | InterruptedException e) {
                System.err.println("ELASTICSEARCH: closing the node failed: " + e);
            } finally {
                closed.countDown();
                System.out.flush();
                LogManager.shutdown();
            }
        }, "elasticsearch-launcher-shutdown");
        Runtime.getRuntime().addShutdownHook(hook);
        exitZeroOnSigterm();

        try {
            node.start();
        } catch (Exception e) {
            e.printStackTrace();
            // Last, so the tail of the log a test shows has it.
            System.err.println("ELASTICSEARCH FAILED: could not start the node: " + e);
            System.exit(EXIT_FAILED); // the hook closes what was started
            return;
        }

        String httpAddress = node.injector().getInstance(HttpServerTransport.class)
                .boundAddress().publishAddress().toString();
        String transportAddress = node.injector().getInstance(TransportService.class)
                .boundAddress().publishAddress().toString();
        System.out.println("ELASTICSEARCH STARTED http=" + httpAddress
                + " transport=" + transportAddress + " cluster=" + clusterName
                + " node=" + nodeName + " dir=" + dir);
        System.out.flush();

        // Elasticsearch's own threads are daemons: main has to stay until the node is closed.
        closed.await();
    }

    /**
     * SIGTERM: exit with 0 rather than the JVM's default 143, running the shutdown hook (which
     * closes the node) on the way. Without jdk.unsupported's Signal the default stays.
     */
    @SuppressWarnings("removal")
    private static void exitZeroOnSigterm() {
        try {
            sun.misc.Signal.handle(new sun.misc.Signal("TERM"), sig -> System.exit(0));
        } catch (Throwable t) {
            System.err.println("ELASTICSEARCH: cannot handle SIGTERM (" + t + "); it exits with 143");
        }
    }
}
