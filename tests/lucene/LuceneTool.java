// LuceneTool drives the real Lucene (Debian's liblucene8-java) for segfs's
// end-to-end tests and benchmark: it writes an index with Lucene's own
// IndexWriter, opens and searches indexes as a search engine does, and
// runs CheckIndex. It is a single-file source program, run without a
// build tool:
//
//   java -cp /usr/share/java/lucene-core-8.7.0.jar tests/lucene/LuceneTool.java SUBCOMMAND ...
//
// Subcommands:
//
//   build DIR [--docs N] [--segments K] [--seed S] [--body-words W] [--append]
//       Writes a new index into DIR (with --append, a new commit of the
//       index there: its segments kept, K new ones added, the old
//       segments_N deleted as IndexWriter does): N documents flushed every N/K, so K
//       segments, no merges (NoMergePolicy) and no compound files. Each
//       document has stored fields, postings with positions and norms
//       (text fields), points (IntPoint, LongPoint) and doc values
//       (NumericDocValues, SortedDocValues). The content is a function of
//       the seed; the files' bytes are not (Lucene writes random segment
//       ids and the time into them). The defaults make about 135 MB in
//       137 files. The writer's write.lock is removed after it closes:
//       the index is meant to be uploaded, and a remote store holds none.
//
//   open DIR... --dir mmap|nio [--warm WARMDIR] [--queries Q] [--seed S]
//               [--concurrent] [--ready-wait]
//       In one JVM: opens and searches WARMDIR first (so that classes are
//       loaded and compiled, as in a running engine), then with
//       --ready-wait prints "ready" and waits for a line on stdin (the
//       caller drops the page cache in between), then times
//       DirectoryReader.open of each DIR (one after another, or all at
//       once on threads with --concurrent), then runs Q seeded queries
//       on each (term, boolean and numeric range queries, some sorted by
//       a doc values field, each fetching the stored fields of its top
//       hits) and closes. Output lines, one per event, key=value:
//         warm ms=... queries=...
//         open kind=mmap ms=12.345 segments=3 docs=3000 dir=PATH
//         queries kind=mmap n=200 hits=123456 digest=89abcdef p50=0.123 p99=1.234 max=2.345 total=45.6 dir=PATH
//       (times in milliseconds; dir last, as it may hold spaces). Equal
//       hits and digest mean equal results: the digest is a CRC-32 of
//       every query's total hit count and the stored ids of its hits.
//
//   follow DIR --dir mmap|nio
//       Opens DIR, prints its open line, then for each line on stdin
//       ("quit" ends) calls DirectoryReader.openIfChanged, as a search
//       engine's refresh does, searches the new reader (20 queries) and
//       prints:
//         reopen changed=true segments=4 docs=4000 hits=1234 dir=PATH
//       and "ready" before each wait.
//
//   check DIR
//       Runs CheckIndex on DIR (read-only: no write lock is taken) and
//       exits 0 only if the index is clean; prints CheckIndex's report
//       to stderr otherwise.
//
// Exit status: 0 on success, 1 on a failed check or an error, 2 on a
// usage error.

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

import org.apache.lucene.analysis.standard.StandardAnalyzer;
import org.apache.lucene.document.Document;
import org.apache.lucene.document.Field;
import org.apache.lucene.document.IntPoint;
import org.apache.lucene.document.LongPoint;
import org.apache.lucene.document.NumericDocValuesField;
import org.apache.lucene.document.SortedDocValuesField;
import org.apache.lucene.document.StoredField;
import org.apache.lucene.document.StringField;
import org.apache.lucene.document.TextField;
import org.apache.lucene.index.CheckIndex;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.NoMergePolicy;
import org.apache.lucene.index.Term;
import org.apache.lucene.search.BooleanClause;
import org.apache.lucene.search.BooleanQuery;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.Query;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.Sort;
import org.apache.lucene.search.SortField;
import org.apache.lucene.search.TermQuery;
import org.apache.lucene.search.TopDocs;
import org.apache.lucene.search.TopFieldCollector;
import org.apache.lucene.search.TopScoreDocCollector;
import org.apache.lucene.store.Directory;
import org.apache.lucene.store.FSDirectory;
import org.apache.lucene.store.MMapDirectory;
import org.apache.lucene.store.NIOFSDirectory;
import org.apache.lucene.store.NoLockFactory;
import org.apache.lucene.util.BytesRef;

public class LuceneTool {
    // The vocabulary and the field value ranges, shared by build and the
    // queries so that queries hit.
    static final int VOCAB = 50_000;
    static final int NUM_MAX = 1_000_000;
    static final long TS_BASE = 1_700_000_000_000L;
    static final int CATEGORIES = 64;
    static final int TOP = 10;

    public static void main(String[] args) {
        if (args.length < 1) {
            usage("no subcommand");
        }
        try {
            Args a = new Args(Arrays.copyOfRange(args, 1, args.length));
            switch (args[0]) {
                case "build":
                    build(a);
                    break;
                case "open":
                    open(a);
                    break;
                case "follow":
                    follow(a);
                    break;
                case "check":
                    System.exit(check(a) ? 0 : 1);
                    break;
                default:
                    usage("unknown subcommand " + args[0]);
            }
        } catch (UsageException e) {
            usage(e.getMessage());
        } catch (Exception e) {
            System.err.println("LuceneTool " + args[0] + ": " + e);
            e.printStackTrace(System.err);
            System.exit(1);
        }
    }

    static void usage(String why) {
        System.err.println("LuceneTool: " + why);
        System.err.println("usage: LuceneTool build DIR [--docs N] [--segments K] [--seed S] [--body-words W]");
        System.err.println("       LuceneTool open DIR... --dir mmap|nio [--warm WARMDIR] [--queries Q] [--seed S] [--concurrent] [--ready-wait]");
        System.err.println("       LuceneTool check DIR");
        System.exit(2);
    }

    static class UsageException extends Exception {
        UsageException(String m) {
            super(m);
        }
    }

    // Args splits positional arguments from --flag value pairs; the
    // boolean flags take no value.
    static class Args {
        final List<String> positional = new ArrayList<>();
        final java.util.Map<String, String> flags = new java.util.HashMap<>();
        static final List<String> BOOLEAN = Arrays.asList("--concurrent", "--ready-wait", "--append");

        Args(String[] args) throws UsageException {
            for (int i = 0; i < args.length; i++) {
                String s = args[i];
                if (!s.startsWith("--")) {
                    positional.add(s);
                } else if (BOOLEAN.contains(s)) {
                    flags.put(s, "true");
                } else if (i + 1 < args.length) {
                    flags.put(s, args[++i]);
                } else {
                    throw new UsageException(s + " needs a value");
                }
            }
        }

        long num(String flag, long def) throws UsageException {
            String v = flags.get(flag);
            if (v == null) {
                return def;
            }
            try {
                return Long.parseLong(v);
            } catch (NumberFormatException e) {
                throw new UsageException(flag + " " + v + ": not a number");
            }
        }

        String str(String flag, String def) {
            return flags.getOrDefault(flag, def);
        }

        boolean bool(String flag) {
            return flags.containsKey(flag);
        }
    }

    // Words are the vocabulary's terms, made of syllables so that they
    // are plain lowercase ASCII tokens StandardAnalyzer keeps as they are.
    static String[] vocabulary(long seed) {
        String[] syl = {"ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "be", "do", "fu", "ga", "hi", "jo", "pe", "qu", "ri", "su", "ty", "wo", "xe", "za"};
        Random r = new Random(seed ^ 0x5eed5eedL);
        String[] words = new String[VOCAB];
        for (int i = 0; i < VOCAB; i++) {
            StringBuilder b = new StringBuilder();
            int n = 2 + r.nextInt(3);
            for (int j = 0; j < n; j++) {
                b.append(syl[r.nextInt(syl.length)]);
            }
            words[i] = b.toString();
        }
        return words;
    }

    // rank draws a vocabulary rank roughly by Zipf's law (log-uniform):
    // a few words are in most documents, most words in few.
    static int rank(Random r, int n) {
        return Math.min(n - 1, (int) StrictMath.pow(n, r.nextDouble()) - 1);
    }

    static String text(Random r, String[] words, int n) {
        StringBuilder b = new StringBuilder(n * 8);
        for (int i = 0; i < n; i++) {
            if (i > 0) {
                b.append(' ');
            }
            b.append(words[rank(r, words.length)]);
        }
        return b.toString();
    }

    static String category(int i) {
        return String.format(Locale.ROOT, "cat%02d", i);
    }

    static void build(Args a) throws Exception {
        if (a.positional.size() != 1) {
            throw new UsageException("build takes one DIR");
        }
        Path dir = Paths.get(a.positional.get(0));
        long docs = a.num("--docs", 100_000);
        long segments = a.num("--segments", 8);
        long seed = a.num("--seed", 1);
        long bodyWords = a.num("--body-words", 200);
        if (docs < 1 || segments < 1 || segments > docs || bodyWords < 1) {
            throw new UsageException("want --docs >= --segments >= 1 and --body-words >= 1");
        }
        long perSegment = (docs + segments - 1) / segments;
        String[] words = vocabulary(seed);
        Random r = new Random(seed);
        long start = System.nanoTime();
        IndexWriterConfig cfg = new IndexWriterConfig(new StandardAnalyzer())
                .setOpenMode(a.bool("--append") ? IndexWriterConfig.OpenMode.APPEND : IndexWriterConfig.OpenMode.CREATE)
                .setMergePolicy(NoMergePolicy.INSTANCE)
                .setUseCompoundFile(false)
                // Segments are cut by the explicit flushes below only:
                // no flush by document count, and a RAM buffer larger
                // than a segment of the sizes this tool is run with.
                .setMaxBufferedDocs(IndexWriterConfig.DISABLE_AUTO_FLUSH)
                .setRAMBufferSizeMB(1024)
                .setCommitOnClose(true);
        Files.createDirectories(dir);
        try (Directory d = FSDirectory.open(dir); IndexWriter w = new IndexWriter(d, cfg)) {
            for (long i = 0; i < docs; i++) {
                w.addDocument(document(r, words, i, (int) bodyWords));
                if ((i + 1) % perSegment == 0 && i + 1 < docs) {
                    w.flush();
                }
            }
            w.commit();
        }
        // The lock is the writer's, not the index's: a remote store holds
        // no write.lock, and one left in place would be uploaded with it.
        Files.deleteIfExists(dir.resolve(IndexWriter.WRITE_LOCK_NAME));
        long bytes = 0;
        int files = 0;
        try (var s = Files.list(dir)) {
            for (Path p : (Iterable<Path>) s::iterator) {
                bytes += Files.size(p);
                files++;
            }
        }
        System.out.printf(Locale.ROOT, "build docs=%d segments=%d files=%d bytes=%d ms=%.1f dir=%s%n",
                docs, segments, files, bytes, (System.nanoTime() - start) / 1e6, dir);
    }

    static Document document(Random r, String[] words, long i, int bodyWords) {
        Document doc = new Document();
        String id = String.format(Locale.ROOT, "doc-%010d", i);
        doc.add(new StringField("id", id, Field.Store.YES));
        doc.add(new SortedDocValuesField("id", new BytesRef(id)));
        doc.add(new TextField("title", text(r, words, 4 + r.nextInt(8)), Field.Store.YES));
        doc.add(new TextField("body", text(r, words, bodyWords / 2 + r.nextInt(bodyWords)), Field.Store.YES));
        int num = r.nextInt(NUM_MAX);
        doc.add(new IntPoint("num", num));
        doc.add(new NumericDocValuesField("num", num));
        doc.add(new StoredField("num", num));
        long ts = TS_BASE + i * 1000 + r.nextInt(1000);
        doc.add(new LongPoint("ts", ts));
        doc.add(new NumericDocValuesField("ts", ts));
        doc.add(new StoredField("ts", ts));
        String cat = category(rank(r, CATEGORIES));
        doc.add(new StringField("cat", cat, Field.Store.NO));
        doc.add(new SortedDocValuesField("cat", new BytesRef(cat)));
        return doc;
    }

    static Directory directory(String kind, Path p) throws IOException, UsageException {
        // No lock factory: the tool only reads, and a mount is read-only.
        switch (kind) {
            case "mmap":
                return new MMapDirectory(p, NoLockFactory.INSTANCE);
            case "nio":
                return new NIOFSDirectory(p, NoLockFactory.INSTANCE);
            default:
                throw new UsageException("--dir " + kind + ": want mmap or nio");
        }
    }

    // Opened is one index held open: its directory, reader and the time
    // DirectoryReader.open took.
    static class Opened {
        final Path path;
        final Directory dir;
        final DirectoryReader reader;
        final double ms;

        Opened(Path path, Directory dir, DirectoryReader reader, double ms) {
            this.path = path;
            this.dir = dir;
            this.reader = reader;
            this.ms = ms;
        }

        void close() throws IOException {
            reader.close();
            dir.close();
        }
    }

    static Opened openOne(String kind, Path p) throws Exception {
        Directory d = directory(kind, p);
        long t0 = System.nanoTime();
        DirectoryReader r;
        try {
            r = DirectoryReader.open(d);
        } catch (Exception e) {
            d.close();
            throw new IOException("open " + p + ": " + e, e);
        }
        return new Opened(p, d, r, (System.nanoTime() - t0) / 1e6);
    }

    static void follow(Args a) throws Exception {
        if (a.positional.size() != 1) {
            throw new UsageException("follow takes one DIR");
        }
        String kind = a.str("--dir", "");
        Opened o = openOne(kind, Paths.get(a.positional.get(0)));
        DirectoryReader r = o.reader;
        System.out.printf(Locale.ROOT, "open kind=%s ms=%.3f segments=%d docs=%d dir=%s%n",
                kind, o.ms, r.leaves().size(), r.numDocs(), o.path);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try {
            for (int round = 1; ; round++) {
                System.out.println("ready");
                System.out.flush();
                String line = in.readLine();
                if (line == null || line.equals("quit")) {
                    return;
                }
                DirectoryReader next = DirectoryReader.openIfChanged(r);
                boolean changed = next != null;
                if (changed) {
                    r.close();
                    r = next;
                }
                Result res = search(r, 20, round);
                System.out.printf(Locale.ROOT, "reopen changed=%b segments=%d docs=%d hits=%d dir=%s%n",
                        changed, r.leaves().size(), r.numDocs(), res.hits, o.path);
                System.out.flush();
            }
        } finally {
            r.close();
            o.dir.close();
        }
    }

    static void open(Args a) throws Exception {
        if (a.positional.isEmpty()) {
            throw new UsageException("open takes at least one DIR");
        }
        String kind = a.str("--dir", "");
        int queries = (int) a.num("--queries", 200);
        long seed = a.num("--seed", 1);
        directory(kind, Paths.get(".")).close(); // checks --dir before any work
        String warm = a.flags.get("--warm");
        if (warm != null) {
            long t0 = System.nanoTime();
            Opened o = openOne(kind, Paths.get(warm));
            Result res = search(o.reader, queries, seed);
            o.close();
            System.out.printf(Locale.ROOT, "warm ms=%.1f queries=%d%n", (System.nanoTime() - t0) / 1e6, res.lat.length);
        }
        if (a.bool("--ready-wait")) {
            System.out.println("ready");
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            if (in.readLine() == null) {
                throw new IOException("stdin closed before the go-ahead");
            }
        }
        List<Opened> opened = new ArrayList<>();
        try {
            if (a.bool("--concurrent")) {
                ExecutorService pool = Executors.newFixedThreadPool(a.positional.size());
                try {
                    List<Future<Opened>> fs = new ArrayList<>();
                    for (String p : a.positional) {
                        fs.add(pool.submit(() -> openOne(kind, Paths.get(p))));
                    }
                    Exception first = null;
                    for (Future<Opened> f : fs) {
                        try {
                            opened.add(f.get());
                        } catch (Exception e) {
                            first = first == null ? e : first;
                        }
                    }
                    if (first != null) {
                        throw first;
                    }
                } finally {
                    pool.shutdown();
                    pool.awaitTermination(1, TimeUnit.MINUTES);
                }
            } else {
                for (String p : a.positional) {
                    opened.add(openOne(kind, Paths.get(p)));
                }
            }
            for (Opened o : opened) {
                System.out.printf(Locale.ROOT, "open kind=%s ms=%.3f segments=%d docs=%d dir=%s%n",
                        kind, o.ms, o.reader.leaves().size(), o.reader.numDocs(), o.path);
            }
            System.out.flush();
            for (Opened o : opened) {
                Result res = search(o.reader, queries, seed);
                double[] lat = res.lat.clone();
                Arrays.sort(lat);
                double total = 0;
                for (double x : lat) {
                    total += x;
                }
                System.out.printf(Locale.ROOT, "queries kind=%s n=%d hits=%d digest=%08x p50=%.3f p99=%.3f max=%.3f total=%.1f dir=%s%n",
                        kind, lat.length, res.hits, res.digest, pct(lat, 50), pct(lat, 99), lat.length == 0 ? 0 : lat[lat.length - 1], total, o.path);
            }
        } finally {
            for (Opened o : opened) {
                o.close();
            }
        }
    }

    // pct is the nearest-rank percentile of sorted values.
    static double pct(double[] sorted, int p) {
        if (sorted.length == 0) {
            return 0;
        }
        int i = (int) Math.ceil(p / 100.0 * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, i))];
    }

    static class Result {
        double[] lat;
        long hits;
        long digest;
    }

    // search runs n seeded queries, each counting all its hits and
    // fetching the stored fields of its top hits, and returns their
    // latencies, the sum of their hit counts and a digest of the results.
    static Result search(DirectoryReader reader, int n, long seed) throws IOException {
        IndexSearcher s = new IndexSearcher(reader);
        String[] words = vocabulary(seed);
        Random r = new Random(seed * 31 + 7);
        Result res = new Result();
        res.lat = new double[n];
        CRC32 crc = new CRC32();
        Sort byTs = new Sort(new SortField("ts", SortField.Type.LONG, true));
        for (int i = 0; i < n; i++) {
            Query q;
            Sort sort = null;
            switch (i % 4) {
                case 0:
                    q = new TermQuery(new Term("body", words[rank(r, VOCAB)]));
                    break;
                case 1: {
                    int lo = r.nextInt(NUM_MAX);
                    q = IntPoint.newRangeQuery("num", lo, lo + r.nextInt(NUM_MAX / 100));
                    break;
                }
                case 2: {
                    long lo = TS_BASE + (long) r.nextInt(Math.max(1, reader.maxDoc())) * 1000;
                    q = LongPoint.newRangeQuery("ts", lo, lo + 1000L * (1 + r.nextInt(500)));
                    sort = byTs;
                    break;
                }
                default:
                    q = new BooleanQuery.Builder()
                            .add(new TermQuery(new Term("body", words[rank(r, VOCAB)])), BooleanClause.Occur.MUST)
                            .add(new TermQuery(new Term("cat", category(rank(r, CATEGORIES)))), BooleanClause.Occur.FILTER)
                            .build();
            }
            long t0 = System.nanoTime();
            TopDocs top;
            // Exact hit counts (no early termination), so that two opens
            // of one index can be compared by them.
            if (sort == null) {
                TopScoreDocCollector c = TopScoreDocCollector.create(TOP, Integer.MAX_VALUE);
                s.search(q, c);
                top = c.topDocs();
            } else {
                TopFieldCollector c = TopFieldCollector.create(sort, TOP, Integer.MAX_VALUE);
                s.search(q, c);
                top = c.topDocs();
            }
            crc.update(Long.toString(top.totalHits.value).getBytes(StandardCharsets.UTF_8));
            for (ScoreDoc sd : top.scoreDocs) {
                Document d = s.doc(sd.doc);
                crc.update(d.get("id").getBytes(StandardCharsets.UTF_8));
                crc.update(d.get("body").length());
            }
            res.lat[i] = (System.nanoTime() - t0) / 1e6;
            res.hits += top.totalHits.value;
        }
        res.digest = crc.getValue();
        return res;
    }

    static boolean check(Args a) throws Exception {
        if (a.positional.size() != 1) {
            throw new UsageException("check takes one DIR");
        }
        Path p = Paths.get(a.positional.get(0));
        try (Directory d = new MMapDirectory(p, NoLockFactory.INSTANCE);
             CheckIndex ci = new CheckIndex(d, NoLockFactory.INSTANCE.obtainLock(d, IndexWriter.WRITE_LOCK_NAME))) {
            ByteArrayOutputStream report = new ByteArrayOutputStream();
            ci.setInfoStream(new PrintStream(report, true, StandardCharsets.UTF_8));
            long t0 = System.nanoTime();
            CheckIndex.Status st = ci.checkIndex();
            System.out.printf(Locale.ROOT, "check clean=%b segments=%d docs=%d ms=%.1f dir=%s%n",
                    st.clean, st.numSegments, docCount(st), (System.nanoTime() - t0) / 1e6, p);
            if (!st.clean) {
                System.err.print(report.toString(StandardCharsets.UTF_8));
            }
            return st.clean;
        }
    }

    static long docCount(CheckIndex.Status st) {
        long n = 0;
        for (CheckIndex.Status.SegmentInfoStatus s : st.segmentInfos) {
            n += s.maxDoc;
        }
        return n;
    }
}
