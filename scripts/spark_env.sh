#!/usr/bin/env bash
# Builds .venv-spark/: PySpark 3.5 with Iceberg's Spark runtime and the JDBC drivers, for the tests in which Spark
# reads our Iceberg tables through Iceberg's JdbcCatalog (docs/spark.md says where each jar comes from and why).
# Spark's pins differ from the project's, so it gets its own venv and never enters pyproject.toml.
# Idempotent: a stamp file records what was built; a second run with the same versions does nothing.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${SPARK_VENV:-$ROOT/.venv-spark}"
PYTHON="${PYTHON:-python3}"

PYSPARK_VERSION=3.5.9
PY4J_VERSION=0.10.9.7 # the py4j that pyspark 3.5.9 requires, its one runtime dependency
ICEBERG_DEPS_VERSION=1.0.3
# dbt's `spark` target (docs/spark.md): dbt-spark's session mode runs PySpark inside dbt. Its dependencies (dbt-core,
# dbt-adapters, ...) are held to the project's pins by constraints.txt, so both venvs run the same dbt-core 1.11.
DBT_SPARK_VERSION=1.11.0
ICEBERG_RUNTIME=iceberg-spark-runtime-3.5_2.12-1.10.2.jar
APT_PACKAGES=(libjarjar-java libpostgresql-jdbc-java libxerial-sqlite-jdbc-java)
SHADE_PREFIX=org.apache.iceberg.shaded.com.fasterxml.jackson

STAMP="$VENV/.spark-env"
WANT="pyspark=$PYSPARK_VERSION py4j=$PY4J_VERSION snowpark-connect-deps-iceberg=$ICEBERG_DEPS_VERSION dbt-spark=$DBT_SPARK_VERSION"
JARS="$VENV/jars"

# Two test workers may need the venv at once: the second waits for the first build, then finds it up to date.
exec 9>"$VENV.lock"
flock 9

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" && -s "$JARS/$ICEBERG_RUNTIME" ]]; then
    echo "spark-env: $VENV is up to date ($WANT)"
    exit 0
fi

STEPS=6
step() { echo "spark-env [$1/$STEPS] $2 (at ${SECONDS}s)"; }

step 1 "Debian packages: ${APT_PACKAGES[*]}"
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "spark-env: missing Debian packages ${missing[*]}: install them with apt-get (as root), then re-run" >&2
        exit 1
    fi
    echo "  installing ${missing[*]}"
    # Another apt-get (a parallel setup) may hold the lock: wait for it rather than fail.
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v java >/dev/null || { echo "spark-env: no java on PATH: install a JDK 17 (openjdk-17-jre-headless)" >&2; exit 1; }

step 2 "venv $VENV"
rm -f "$STAMP"
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"

step 3 "pip: pyspark==$PYSPARK_VERSION py4j==$PY4J_VERSION snowpark-connect-deps-iceberg==$ICEBERG_DEPS_VERSION"
# --no-deps: the three are all we need (snowpark's wheel only carries jars); pins are exact, so no resolver walk.
"$VENV/bin/python" -m pip install --quiet --no-deps --progress-bar off \
    "pyspark==$PYSPARK_VERSION" "py4j==$PY4J_VERSION" "snowpark-connect-deps-iceberg==$ICEBERG_DEPS_VERSION"
step 4 "pip: dbt-spark[session]==$DBT_SPARK_VERSION (constrained by constraints.txt)"
# With dependencies this time (dbt-core and its tree); pyspark is already there at its pin and satisfies [session].
"$VENV/bin/python" -m pip install --quiet --progress-bar off -c "$ROOT/constraints.txt" \
    "dbt-spark[session]==$DBT_SPARK_VERSION" "pyspark==$PYSPARK_VERSION"
"$VENV/bin/dbt" --version | grep -q "installed: 1.11" || { echo "spark-env: dbt-core in $VENV is not 1.11" >&2; exit 1; }
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
SPARK_JARS="$SITE/pyspark/jars"

step 5 "re-shading Spark's Jackson to $SHADE_PREFIX (jarjar)"
# The runtime jar in this wheel refers to Jackson under Iceberg's relocated package but lacks those classes;
# Spark's own Jackson of the same line, relocated the same way, supplies them.
rm -rf "$JARS" && mkdir -p "$JARS"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "rule com.fasterxml.jackson.** $SHADE_PREFIX.@1" >"$work/rules.txt"
for name in jackson-core jackson-databind jackson-annotations; do
    src="$(ls "$SPARK_JARS"/$name-2.*.jar)"
    base="$(basename "$src" .jar)"
    # jarjar renames a multi-release jar's META-INF/versions/N/ classes onto the same names as the base classes
    # and then refuses the duplicate entries; the base (Java 8) classes are all a JVM needs.
    "$VENV/bin/python" - "$src" "$work/$base.jar" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as src, zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED) as dst:
    for item in src.infolist():
        if not item.filename.startswith("META-INF/versions/") and not item.filename.endswith("module-info.class"):
            dst.writestr(item, src.read(item.filename))
EOF
    java -jar /usr/share/java/jarjar.jar process "$work/rules.txt" "$work/$base.jar" "$JARS/$base-iceberg-shaded.jar"
    # jarjar exits 0 even when it wrote nothing.
    [[ -s "$JARS/$base-iceberg-shaded.jar" ]] || { echo "spark-env: jarjar did not re-shade $src" >&2; exit 1; }
    echo "  $base -> $(basename "$JARS/$base-iceberg-shaded.jar")"
done

step 6 "collecting jars into $JARS"
cp "$SITE/snowpark_connect_deps_iceberg/jars/$ICEBERG_RUNTIME" "$JARS/"
cp -L /usr/share/java/postgresql.jar "$JARS/postgresql-jdbc.jar"
cp -L /usr/share/java/sqlite-jdbc.jar "$JARS/sqlite-jdbc.jar"
ls -1 "$JARS" | sed 's/^/  /'
echo "$WANT" >"$STAMP"
echo "spark-env: ready ($VENV) in ${SECONDS}s"
